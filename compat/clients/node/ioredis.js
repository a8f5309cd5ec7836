'use strict';
// ioredis 5 against a throttled node: node ioredis.js HOST PORT PASSWORD
//
// Run by compat/node_test.go against a fresh node started with --requirepass
// PASSWORD and its debug clock set to 1700000000 s. ioredis 5 speaks RESP2
// only. Its handshake is AUTH, SELECT, CLIENT SETNAME, CLIENT SETINFO
// LIB-NAME/LIB-VER (errors ignored), then the INFO ready check, which must
// succeed. Each check compares a reply with what ioredis returns from Redis
// 7.0 for the same call.

const Redis = require('ioredis');
const { version } = require('ioredis/package.json');
const { CLOCK_START_S, CELL_V04, LIMITER_LUA, eq, rejects, commandCalls, diffCalls, run, parseArgs } = require('./check');

const { host, port, password } = parseArgs('node ioredis.js HOST PORT PASSWORD');

// Every client fails fast: no reconnects, no offline queue, no retries.
function client(opts = {}) {
  return new Redis({
    host, port, password,
    lazyConnect: true,
    connectTimeout: 10000,
    commandTimeout: 10000,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    ...opts,
  });
}

const clients = [];
async function connected(opts) {
  const c = client(opts);
  clients.push(c);
  c.on('error', () => {}); // surfaced through the rejected calls instead
  await c.connect();
  return c;
}

// connectErrors connects a client that must fail, as ioredis fails against
// Redis, and returns the 'error' events it emitted.
async function connectErrors(opts) {
  const c = client(opts);
  clients.push(c);
  const errs = [];
  c.on('error', (e) => errs.push(`${e.constructor.name}: ${e.message}`));
  await rejects('connect', c.connect(), { name: 'Error', message: 'Connection is closed.' });
  return errs;
}

let r; // the main client: db 0
let clockMs = CLOCK_START_S * 1000;
async function advance(ms) {
  clockMs += ms;
  // The reply (Unix ns) is past 2^53, so ioredis' number loses digits: check TIME instead.
  await r.call('DEBUG', 'CLOCK', 'ADVANCE', String(ms * 1e6));
  eq('TIME after DEBUG CLOCK ADVANCE', await r.time(),
    [String(Math.floor(clockMs / 1000)), String((clockMs % 1000) * 1000)]);
}

async function stats() {
  return commandCalls(await r.info('commandstats'));
}

const sections = [
  ['handshake', async () => {
    r = await connected({ connectionName: 'compat-ioredis' });
    eq('status after the INFO ready check', r.status, 'ready');
    eq('PING', await r.ping(), 'PONG');
    eq('CLIENT GETNAME', await r.client('GETNAME'), 'compat-ioredis');
    const me = await r.client('INFO');
    for (const field of ['name=compat-ioredis', 'db=0', 'resp=2', 'lib-name=ioredis', `lib-ver=${version}`]) {
      eq(`CLIENT INFO has ${field}`, me.split(/\s+/).includes(field), true);
    }
    eq('INFO redis_version', /^redis_version:7\.0\.15\r$/m.test(await r.info('server')), true);
    eq('TIME', await r.time(), [String(CLOCK_START_S), '0']);

    // db 3: SELECT in the handshake.
    const d3 = await connected({ db: 3 });
    eq('SET in db 3', await d3.set('only-in-3', 'x'), 'OK');
    eq('DBSIZE db 3', await d3.dbsize(), 1);
    eq('GET in db 0', await r.get('only-in-3'), null);
    eq('CLIENT INFO db', (await d3.client('INFO')).includes(' db=3 '), true);

    // A wrong password, or none, makes connect() fail (the connection is
    // closed, no retry) after an 'error' event with the server's reply.
    const wrong = await connectErrors({ password: 'wrong' });
    eq('wrong password', wrong, ['ReplyError: WRONGPASS invalid username-password pair or user is disabled.']);
    // Without a password the INFO ready check gets NOAUTH, which is fatal.
    const none = await connectErrors({ password: undefined });
    eq('no password', none, ['ReplyError: NOAUTH Authentication required.']);
    // And a URL with password and database.
    const u = new Redis(`redis://:${password}@${host}:${port}/4`, { lazyConnect: true, retryStrategy: () => null });
    clients.push(u);
    await u.connect();
    eq('URL: CLIENT INFO db', (await u.client('INFO')).includes(' db=4 '), true);
  }],

  ['strings', async () => {
    eq('SET', await r.set('greeting', 'hello'), 'OK');
    eq('GET', await r.get('greeting'), 'hello');
    eq('GET missing', await r.get('missing'), null);
    eq('SET NX on an existing key', await r.set('greeting', 'x', 'NX'), null);
    eq('SET XX GET', await r.set('greeting', 'hi', 'XX', 'GET'), 'hello');
    eq('GET as a Buffer', await r.getBuffer('greeting'), Buffer.from('hi'));
    eq('SETNX', await r.setnx('fresh', 1), 1);
    eq('MSET', await r.mset({ m1: 'a', m2: 'b' }), 'OK');
    eq('MGET', await r.mget('m1', 'missing', 'm2'), ['a', null, 'b']);
    eq('EXISTS', await r.exists('m1', 'm2', 'nope'), 2);
    eq('DEL', await r.del('m1', 'm2', 'nope'), 2);
    eq('TYPE', await r.type('greeting'), 'string');
    const seen = [];
    await new Promise((resolve, reject) => {
      r.scanStream({ match: 'gr*', count: 10 })
        .on('data', (keys) => seen.push(...keys))
        .on('end', resolve).on('error', reject);
    });
    eq('scanStream', seen, ['greeting']);
  }],

  ['counters', async () => {
    eq('INCR', await r.incr('n'), 1);
    eq('INCRBY', await r.incrby('n', 10), 11);
    eq('DECRBY', await r.decrby('n', 20), -9);
    eq('GET counter', await r.get('n'), '-9');
    await r.set('text', 'abc');
    await rejects('INCR on text', r.incr('text'), {
      name: 'ReplyError', message: 'ERR value is not an integer or out of range',
    });
  }],

  ['expiry', async () => {
    await r.set('session', 's', 'EX', 10);
    eq('TTL', await r.ttl('session'), 10);
    eq('PTTL', await r.pttl('session'), 10000);
    eq('EXPIRE', await r.expire('greeting', 5), 1);
    eq('EXPIRE missing', await r.expire('nothing', 5), 0);
    await advance(9500);
    eq('PTTL after 9.5 s', await r.pttl('session'), 500);
    eq('GET expired', await r.get('greeting'), null);
    await advance(501);
    eq('GET past the deadline', await r.get('session'), null);
    eq('TTL missing', await r.ttl('session'), -2);
  }],

  ['pipeline', async () => {
    const res = await r.pipeline().set('p:a', 1).incr('p:a').get('p:a').expire('p:a', 7).ttl('p:a').exec();
    eq('pipeline', res, [[null, 'OK'], [null, 2], [null, '2'], [null, 1], [null, 7]]);
    const p = r.pipeline();
    for (let i = 0; i < 100; i++) p.incr('p:n');
    eq('pipeline of 100', (await p.exec()).at(-1), [null, 100]);
    // An error stays with its command.
    const mixed = await r.pipeline().incr('text').incr('p:a').exec();
    eq('error in a pipeline', mixed[0][0].message, 'ERR value is not an integer or out of range');
    eq('the next command ran', mixed[1], [null, 3]);
  }],

  ['multi', async () => {
    eq('MULTI/EXEC', await r.multi().set('m:a', 1).incr('m:a').get('m:a').exec(),
      [[null, 'OK'], [null, 2], [null, '2']]);
    // A command refused while queuing aborts the transaction.
    const err = await rejects('EXECABORT', r.multi().set('m:b', 1).call('INCR').exec(), {
      name: 'ReplyError', message: 'EXECABORT Transaction discarded because of previous errors.',
    });
    eq('previous errors', err.previousErrors.map((e) => e.message),
      ["ERR wrong number of arguments for 'incr' command"]);
    eq('nothing ran', await r.exists('m:b'), 0);
    // WATCH on a connection of its own: another client's write fails EXEC.
    const w = await connected();
    const other = await connected();
    eq('WATCH', await w.watch('m:a'), 'OK');
    await other.set('m:a', 10);
    eq('EXEC after a watched change', await w.multi().set('m:a', 99).exec(), null);
    eq('value kept', await r.get('m:a'), '10');
  }],

  ['throttle', async () => {
    eq('CL.THROTTLE', await r.call('CL.THROTTLE', 'user123', 15, 30, 60), [0, 16, 15, -1, 2]);
    eq('PTTL of the TAT', await r.pttl('user123'), 2000);
    for (const [i, [ms, args, want]] of CELL_V04.entries()) {
      if (ms) await advance(ms);
      eq(`V04 step ${i}`, await r.call('CL.THROTTLE', 'foo', ...args), want);
    }
    const res = await r.pipeline()
      .call('CL.THROTTLE', 'batch', 1, 1, 10)
      .call('CL.THROTTLE', 'batch', 1, 1, 10)
      .call('CL.THROTTLE', 'batch', 1, 1, 10)
      .exec();
    eq('pipelined CL.THROTTLE', res, [[null, [0, 2, 1, -1, 10]], [null, [0, 2, 0, -1, 20]], [null, [1, 2, 0, 10, 20]]]);
    eq('TB.THROTTLE', await r.call('TB.THROTTLE', 'bucket', 5, 1, 2, 4), [0, 5, 1, -1, 8]);
    eq('TB.THROTTLE MS', await r.call('TB.THROTTLE', 'bucket', 5, 1, 2000, 2, 'MS'), [1, 5, 1, 2000, 8000]);
    eq('TYPE', await r.type('bucket'), 'tb');
    await rejects('GET on a tb key', r.get('bucket'), {
      name: 'ReplyError', message: 'WRONGTYPE Operation against a key holding the wrong kind of value',
    });
    await rejects('CL.THROTTLE usage', r.call('CL.THROTTLE', 'k', 1, 2), {
      name: 'ReplyError',
      message: 'Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]',
    });
  }],

  ['scripts', async () => {
    await r.script('FLUSH');
    r.defineCommand('limit', { numberOfKeys: 1, lua: LIMITER_LUA });
    let before = await stats();
    // ioredis sends EVAL the first time on a connection, then EVALSHA.
    eq('script 1', await r.limit('ip:1', 2, 60), [1, 1]);
    eq('script 2', await r.limit('ip:1', 2, 60), [1, 0]);
    eq('script 3', await r.limit('ip:1', 2, 60), [0, 60]);
    let d = diffCalls(before, await stats());
    eq('EVAL calls', d.eval, 1);
    eq('EVALSHA calls', d.evalsha, 2);
    // After SCRIPT FLUSH: EVALSHA gets NOSCRIPT, and ioredis falls back to EVAL.
    await r.script('FLUSH');
    before = await stats();
    eq('script after SCRIPT FLUSH', await r.limit('ip:2', 5, 10), [1, 4]);
    d = diffCalls(before, await stats());
    eq('EVALSHA calls after the flush', d.evalsha, 1);
    eq('EVAL calls after the flush', d.eval, 1);
    // In a pipeline and in MULTI.
    eq('script in a pipeline', await r.pipeline().limit('ip:3', 1, 10).limit('ip:3', 1, 10).exec(),
      [[null, [1, 0]], [null, [0, 10]]]);
    eq('script in MULTI', await r.multi().limit('ip:4', 1, 10).incr('ip:4').exec(),
      [[null, [1, 0]], [null, 2]]);
    // Plain EVAL and the conversions.
    eq('EVAL', await r.eval('return {KEYS[1], ARGV[1], 3.9, true, false}', 1, 'k', 'a'), ['k', 'a', 3, 1, null]);
    eq('TIME in a script', await r.eval("return redis.call('TIME')", 0),
      [String(Math.floor(clockMs / 1000)), String((clockMs % 1000) * 1000)]);
    await rejects('error_reply', r.eval("return redis.error_reply('my error')", 0), {
      name: 'ReplyError', message: 'my error',
    });
    await rejects('script error', r.eval("return redis.call('INCR', KEYS[1])", 1, 'text'), {
      name: 'ReplyError', contains: 'ERR value is not an integer or out of range script: ',
    });
    await rejects('EVALSHA unknown', r.evalsha('0'.repeat(40), 0), {
      name: 'ReplyError', message: 'NOSCRIPT No matching script. Please use EVAL.',
    });
  }],

  ['errors', async () => {
    await rejects('unknown command', r.call('NOSUCH', 'a'), {
      name: 'ReplyError', message: "ERR unknown command 'NOSUCH', with args beginning with: 'a' ",
    });
    await rejects('wrong arity', r.call('GET'), {
      name: 'ReplyError', message: "ERR wrong number of arguments for 'get' command",
    });
    await rejects('SELECT out of range', r.select(99), {
      name: 'ReplyError', message: 'ERR DB index is out of range',
    });
    eq('PING after errors', await r.ping(), 'PONG');
  }],

  ['quit', async () => {
    for (const c of clients.splice(0)) {
      if (c.status === 'ready') eq('QUIT', await c.quit(), 'OK');
      c.disconnect();
    }
  }],
];

run(`ioredis ${version} on node ${process.version}`, sections).then((code) => {
  for (const c of clients) c.disconnect();
  process.exitCode = code;
});
