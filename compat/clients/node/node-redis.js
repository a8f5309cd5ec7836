'use strict';
// node-redis 5 against a throttled node: node node-redis.js HOST PORT PASSWORD MODE
//
// MODE is how the client is configured, and so what its handshake sends:
//   default  no RESP option: AUTH, CLIENT SETNAME, SELECT, CLIENT SETINFO (RESP2)
//   2        RESP: 2: HELLO 2 AUTH default PASSWORD SETNAME name, SELECT, SETINFO
//   3        RESP: 3: HELLO 3 AUTH default PASSWORD SETNAME name, SELECT, SETINFO (RESP3)
// Run by compat/node_test.go against a fresh node started with --requirepass
// PASSWORD and its debug clock set to 1700000000 s. Each check compares a
// reply with what node-redis returns from Redis 7.0 for the same call.

const { createClient, defineScript } = require('redis');
const { version } = require('redis/package.json');
const { CLOCK_START_S, CELL_V04, LIMITER_LUA, eq, rejects, commandCalls, diffCalls, run, parseArgs } = require('./check');

const { host, port, password, rest: [mode] } = parseArgs('node node-redis.js HOST PORT PASSWORD default|2|3');
if (!['default', '2', '3'].includes(mode)) {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
const resp = mode === 'default' ? undefined : Number(mode);
const wireResp = resp || 2; // what the connection speaks after the handshake

const limiter = defineScript({
  SCRIPT: LIMITER_LUA,
  NUMBER_OF_KEYS: 1,
  parseCommand(parser, key, limit, window) {
    parser.pushKey(key);
    parser.push(String(limit), String(window));
  },
  transformReply: undefined,
});

const clients = [];
// connect returns a connected client; it fails fast: no reconnects.
async function connect(opts = {}) {
  const c = createClient({
    socket: { host, port, connectTimeout: 10000, reconnectStrategy: false },
    password,
    RESP: resp,
    scripts: { limiter },
    ...opts,
  });
  c.errors = [];
  c.on('error', (e) => c.errors.push(e));
  try {
    await c.connect();
  } catch (e) {
    if (c.isOpen) c.destroy();
    throw e;
  }
  clients.push(c);
  return c;
}

let r; // the main client, db 1
let clockMs = CLOCK_START_S * 1000;
async function advance(ms) {
  clockMs += ms;
  // The reply (Unix ns) is past 2^53, so a JS number loses digits: check TIME instead.
  await r.sendCommand(['DEBUG', 'CLOCK', 'ADVANCE', String(ms * 1e6)]);
  eq('TIME after DEBUG CLOCK ADVANCE', await r.time(), [String(Math.floor(clockMs / 1000)), String((clockMs % 1000) * 1000)]);
}

async function stats() {
  return commandCalls(await r.info('commandstats'));
}

const sections = [
  ['handshake', async () => {
    r = await connect({ database: 1, name: 'compat-node-redis' });
    eq('PING', await r.ping(), 'PONG');
    eq('CLIENT GETNAME', await r.clientGetName(), 'compat-node-redis');
    const me = String(await r.sendCommand(['CLIENT', 'INFO']));
    for (const field of ['name=compat-node-redis', 'db=1', `resp=${wireResp}`, 'lib-name=node-redis', `lib-ver=${version}`]) {
      eq(`CLIENT INFO has ${field}`, me.split(/\s+/).includes(field), true);
    }
    const hello = await r.hello();
    eq('HELLO', { server: hello.server, version: hello.version, proto: hello.proto, mode: hello.mode, role: hello.role, modules: hello.modules },
      { server: 'redis', version: '7.0.15', proto: wireResp, mode: 'standalone', role: 'master', modules: [] });
    eq('INFO redis_version', /^redis_version:7\.0\.15\r$/m.test(String(await r.info('server'))), true);
    eq('TIME', await r.time(), [String(CLOCK_START_S), '0']);
    // RESP3 maps come back as objects without a prototype.
    eq('CONFIG GET', { ...await r.configGet('maxmemory*') }, { maxmemory: '0', 'maxmemory-policy': 'volatile-ttl' });
    eq('DBSIZE', await r.dbSize(), 0);
    eq('handshake errors', r.errors.map((e) => e.message), []);

    // A wrong password fails connect() with the server's error.
    await rejects('wrong password', connect({ password: 'wrong' }), {
      name: 'SimpleError', message: 'WRONGPASS invalid username-password pair or user is disabled.',
    });
    // A URL with user, password and database.
    const u = await connect({ url: `redis://default:${password}@${host}:${port}/4`, password: undefined, socket: { reconnectStrategy: false } });
    eq('URL: CLIENT INFO db', String(await u.sendCommand(['CLIENT', 'INFO'])).includes(' db=4 '), true);
  }],

  ['strings', async () => {
    eq('SET', await r.set('greeting', 'hello'), 'OK');
    eq('GET', await r.get('greeting'), 'hello');
    eq('GET missing', await r.get('missing'), null);
    eq('SET NX on an existing key', await r.set('greeting', 'x', { condition: 'NX' }), null);
    eq('SET XX GET', await r.set('greeting', 'hi', { condition: 'XX', GET: true }), 'hello');
    eq('SETNX', await r.setNX('fresh', '1'), 1);
    eq('MSET', await r.mSet({ m1: 'a', m2: 'b' }), 'OK');
    eq('MGET', await r.mGet(['m1', 'missing', 'm2']), ['a', null, 'b']);
    eq('GETDEL', await r.getDel('m1'), 'a');
    eq('EXISTS', await r.exists(['m1', 'm2']), 1);
    eq('DEL', await r.del(['m2', 'fresh', 'nope']), 2);
    eq('TYPE', await r.type('greeting'), 'string');
    const seen = [];
    for await (const keys of r.scanIterator({ MATCH: 'gr*', COUNT: 10 })) seen.push(...keys);
    eq('scanIterator', seen, ['greeting']);
  }],

  ['counters', async () => {
    eq('INCR', await r.incr('n'), 1);
    eq('INCRBY', await r.incrBy('n', 10), 11);
    eq('DECRBY', await r.decrBy('n', 20), -9);
    eq('GET counter', await r.get('n'), '-9');
    await r.set('text', 'abc');
    await rejects('INCR on text', r.incr('text'), {
      name: 'SimpleError', message: 'ERR value is not an integer or out of range',
    });
  }],

  ['expiry', async () => {
    await r.set('session', 's', { expiration: { type: 'EX', value: 10 } });
    eq('TTL', await r.ttl('session'), 10);
    eq('PTTL', await r.pTTL('session'), 10000);
    eq('EXPIRE', await r.expire('greeting', 5), 1);
    eq('EXPIRE missing', await r.expire('nothing', 5), 0);
    await advance(9500);
    eq('PTTL after 9.5 s', await r.pTTL('session'), 500);
    eq('GET expired', await r.get('greeting'), null);
    await advance(501);
    eq('GET past the deadline', await r.get('session'), null);
    eq('TTL missing', await r.ttl('session'), -2);
  }],

  ['multi', async () => {
    eq('MULTI/EXEC', await r.multi().set('m:a', '1').incr('m:a').get('m:a').exec(), ['OK', 2, '2']);
    // The same batch as a plain pipeline, without MULTI.
    eq('execAsPipeline', await r.multi().incr('m:a').expire('m:a', 7).ttl('m:a').execAsPipeline(), [3, 1, 7]);
    const p = r.multi();
    for (let i = 0; i < 100; i++) p.incr('m:n');
    eq('pipeline of 100', (await p.execAsPipeline()).at(-1), 100);
    // Errors inside EXEC come back with their index; the others ran.
    const err = await rejects('EXEC with a failing command', r.multi().incr('text').incr('m:a').exec(), {
      name: 'MultiErrorReply',
    });
    eq('error indexes', err.errorIndexes, [0]);
    eq('error reply', err.replies[0].message, 'ERR value is not an integer or out of range');
    eq('other reply', err.replies[1], 4);
    // A command refused while queuing aborts the transaction.
    await rejects('EXECABORT', r.multi().set('m:b', '1').addCommand(['INCR']).exec(), {
      name: 'SimpleError', message: "ERR wrong number of arguments for 'incr' command",
    });
    eq('nothing ran', await r.exists('m:b'), 0);
    // WATCH: another client's write fails the EXEC.
    const w = await connect();
    const other = await connect();
    eq('WATCH', await w.watch('m:a'), 'OK');
    await other.set('m:a', '10');
    await rejects('EXEC after a watched change', w.multi().set('m:a', '99').exec(), { name: 'WatchError' });
    eq('value kept', await w.get('m:a'), '10');
  }],

  ['throttle', async () => {
    eq('CL.THROTTLE', await r.sendCommand(['CL.THROTTLE', 'user123', '15', '30', '60']), [0, 16, 15, -1, 2]);
    eq('PTTL of the TAT', await r.pTTL('user123'), 2000);
    for (const [i, [ms, args, want]] of CELL_V04.entries()) {
      if (ms) await advance(ms);
      eq(`V04 step ${i}`, await r.sendCommand(['CL.THROTTLE', 'foo', ...args.map(String)]), want);
    }
    // Concurrent calls are pipelined on the one connection.
    const batch = await Promise.all([1, 2, 3].map(() => r.sendCommand(['CL.THROTTLE', 'batch', '1', '1', '10'])));
    eq('pipelined CL.THROTTLE', batch, [[0, 2, 1, -1, 10], [0, 2, 0, -1, 20], [1, 2, 0, 10, 20]]);
    eq('FWC.THROTTLE', await r.sendCommand(['FWC.THROTTLE', 'api:alice', '3', '60']), [0, 3, 2, -1, 21]);
    eq('TB.THROTTLE', await r.sendCommand(['TB.THROTTLE', 'bucket', '5', '1', '2', '4']), [0, 5, 1, -1, 8]);
    eq('TYPE', await r.type('bucket'), 'tb');
    await rejects('GET on a tb key', r.get('bucket'), {
      name: 'SimpleError', message: 'WRONGTYPE Operation against a key holding the wrong kind of value',
    });
    await rejects('CL.THROTTLE usage', r.sendCommand(['CL.THROTTLE', 'k', '1', '2']), {
      name: 'SimpleError',
      message: 'Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]',
    });
  }],

  ['scripts', async () => {
    await r.scriptFlush();
    let before = await stats();
    // node-redis sends EVALSHA; on NOSCRIPT it sends EVAL, which loads it.
    eq('script 1', await r.limiter('ip:1', 2, 60), [1, 1]);
    eq('script 2', await r.limiter('ip:1', 2, 60), [1, 0]);
    eq('script 3', await r.limiter('ip:1', 2, 60), [0, 60]);
    let d = diffCalls(before, await stats());
    eq('EVALSHA calls', d.evalsha, 3);
    eq('EVAL calls', d.eval, 1);
    eq('SCRIPT EXISTS', await r.scriptExists([limiter.SHA1, '0'.repeat(40)]), [1, 0]);
    await r.scriptFlush();
    eq('script after SCRIPT FLUSH', await r.limiter('ip:2', 5, 10), [1, 4]);
    // In MULTI it cannot retry, so a script's first use in the transaction
    // goes as EVAL and the next ones as EVALSHA.
    before = await stats();
    eq('script in MULTI', await r.multi().limiter('ip:3', 1, 10).limiter('ip:3', 1, 10).exec(), [[1, 0], [0, 10]]);
    d = diffCalls(before, await stats());
    eq('EVAL, EVALSHA in MULTI', [d.eval, d.evalsha], [1, 1]);
    // Plain EVAL and the conversions.
    eq('EVAL', await r.eval('return {KEYS[1], ARGV[1], 3.9, true, false}', { keys: ['k'], arguments: ['a'] }),
      ['k', 'a', 3, 1, null]);
    eq('TIME in a script', await r.eval("return redis.call('TIME')"),
      [String(Math.floor(clockMs / 1000)), String((clockMs % 1000) * 1000)]);
    await rejects('error_reply', r.eval("return redis.error_reply('my error')"), {
      name: 'SimpleError', message: 'my error',
    });
    await rejects('EVALSHA unknown', r.evalSha('0'.repeat(40)), {
      name: 'SimpleError', message: 'NOSCRIPT No matching script. Please use EVAL.',
    });
    if (wireResp === 3) {
      // RESP3 types from a script: a double and a map.
      eq('double', await r.eval("redis.setresp(3); return {double=3.5}"), 3.5);
      eq('map', { ...await r.eval("redis.setresp(3); return {map={a=1}}") }, { a: 1 });
    }
  }],

  ['errors', async () => {
    await rejects('unknown command', r.sendCommand(['NOSUCH', 'a']), {
      name: 'SimpleError', message: "ERR unknown command 'NOSUCH', with args beginning with: 'a' ",
    });
    await rejects('wrong arity', r.sendCommand(['GET']), {
      name: 'SimpleError', message: "ERR wrong number of arguments for 'get' command",
    });
    await rejects('SELECT out of range', connect({ database: 99 }), {
      name: 'SimpleError', message: 'ERR DB index is out of range',
    });
    eq('PING after errors', await r.ping(), 'PONG');
  }],

  ['close', async () => {
    for (const c of clients.splice(0)) await c.close();
  }],
];

run(`node-redis ${version} (RESP ${mode}) on node ${process.version}`, sections).then((code) => {
  for (const c of clients) if (c.isOpen) c.destroy();
  process.exitCode = code;
});
