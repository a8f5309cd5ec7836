'use strict';
// Shared helpers of ioredis.js and node-redis.js: exact checks, and a runner
// that runs every section, prints one line per section and sets the exit
// status when any failed.

const util = require('node:util');

// The debug clock every node starts at (2023-11-14T22:13:20Z), in seconds.
const CLOCK_START_S = 1700000000;

class CheckError extends Error {}

// eq fails unless got deep-equals want (strictly: 1 is not '1').
function eq(what, got, want) {
  if (!util.isDeepStrictEqual(got, want)) {
    throw new CheckError(`${what}: got ${util.inspect(got, { depth: 5 })}, want ${util.inspect(want, { depth: 5 })}`);
  }
}

// rejects awaits p and fails unless it rejects with an error whose class is
// named name and whose message is exactly message (or contains contains).
async function rejects(what, p, { name, message, contains }) {
  let err;
  try {
    const v = await p;
    throw new CheckError(`${what}: resolved with ${util.inspect(v)}, want a ${name}`);
  } catch (e) {
    if (e instanceof CheckError) throw e;
    err = e;
  }
  const got = err && err.constructor && err.constructor.name;
  if (got !== name) {
    throw new CheckError(`${what}: rejected with ${got}: ${err && err.message}, want ${name}`);
  }
  if (message !== undefined && err.message !== message) {
    throw new CheckError(`${what}: message ${util.inspect(err.message)}, want ${util.inspect(message)}`);
  }
  if (contains !== undefined && !String(err.message).includes(contains)) {
    throw new CheckError(`${what}: message ${util.inspect(err.message)} does not contain ${util.inspect(contains)}`);
  }
  return err;
}

// commandCalls parses INFO commandstats into { name: calls }.
function commandCalls(info) {
  const calls = {};
  for (const m of String(info).matchAll(/^cmdstat_([^:]+):calls=(\d+),/gm)) {
    calls[m[1]] = Number(m[2]);
  }
  return calls;
}

// diffCalls returns after[name] - before[name] for every name in after.
function diffCalls(before, after) {
  const d = {};
  for (const [k, v] of Object.entries(after)) {
    const n = v - (before[k] || 0);
    if (n !== 0) d[k] = n;
  }
  return d;
}

// run runs the sections in order; a failing one does not stop the others
// (they use their own keys). It returns the process exit status.
async function run(title, sections) {
  console.log(title);
  const failed = [];
  for (const [name, fn] of sections) {
    try {
      await fn();
      console.log(`ok ${name}`);
    } catch (e) {
      failed.push(name);
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  if (failed.length > 0) {
    console.log(`checks failed: ${failed.join(', ')}`);
    return 1;
  }
  console.log('all checks passed');
  return 0;
}

// The V04 vector of redis-cell (CL.THROTTLE foo 4 1 1 [q]): ms to advance
// first, arguments after the key, and the reply.
const CELL_V04 = [
  [0, [4, 1, 1, 6], [1, 5, 5, -1, 0]],
  [0, [4, 1, 1], [0, 5, 4, -1, 1]],
  [0, [4, 1, 1], [0, 5, 3, -1, 2]],
  [0, [4, 1, 1], [0, 5, 2, -1, 3]],
  [0, [4, 1, 1], [0, 5, 1, -1, 4]],
  [0, [4, 1, 1], [0, 5, 0, -1, 5]],
  [0, [4, 1, 1], [1, 5, 0, 1, 5]],
  [3000, [4, 1, 1, 1], [0, 5, 2, -1, 3]],
  [100, [4, 1, 1, 1], [0, 5, 1, -1, 4]],
  [900, [4, 1, 1, 1], [0, 5, 1, -1, 4]],
  [4000, [4, 1, 1, 1], [0, 5, 4, -1, 1]],
  [1500, [4, 1, 1, 1], [0, 5, 4, -1, 1]],
  [0, [4, 1, 1, 0], [0, 5, 4, -1, 1]],
  [0, [4, 1, 1, 2], [0, 5, 2, -1, 3]],
  [0, [4, 1, 1, 5], [1, 5, 2, 3, 3]],
];

// LIMITER_LUA is a fixed-window limiter as apps write it in Lua: INCR, an
// EXPIRE on the first hit, and {allowed, remaining or ttl}.
const LIMITER_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then return {0, redis.call('TTL', KEYS[1])} end
return {1, tonumber(ARGV[1]) - n}
`;

// parseArgs reads HOST PORT PASSWORD [extra...] from the command line.
function parseArgs(usage) {
  const [host, port, password, ...rest] = process.argv.slice(2);
  if (!host || !port || !password) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return { host, port: Number(port), password, rest };
}

module.exports = { CLOCK_START_S, CELL_V04, LIMITER_LUA, eq, rejects, commandCalls, diffCalls, run, parseArgs };
