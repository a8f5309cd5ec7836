#!/usr/bin/env python3
"""redis-py against a throttled node: python3 redispy_compat.py HOST PORT PASSWORD [CA CERT KEY]

Run by compat/python_test.go against a node started with --requirepass
PASSWORD and the debug clock set to 1700000000 s (2023-11-14T22:13:20Z) on a
fresh keyspace. Every check compares a reply with the exact value redis-py
returns from Redis 7.0 for the same call (the clock makes TTLs and throttle
replies exact). With CA, CERT and KEY (PEM files) every connection is TLS
(ssl=True, rediss:// for the URL), trusting CA and showing CERT. It prints one line per section (with the traceback of the
first failed check in a failing section) and exits non-zero if any failed.
"""

import hashlib
import sys
import threading
import traceback

import redis
from redis import exceptions

CLOCK_START_NS = 1_700_000_000_000_000_000


def eq(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def raises(what, exc_type, fn, message=None, contains=None):
    """fn() must raise exc_type (exactly, not a subclass; or one of a tuple
    of types), with str(exc) equal to message or containing contains, when
    given."""
    types = exc_type if isinstance(exc_type, tuple) else (exc_type,)
    try:
        fn()
    except exceptions.RedisError as e:
        if type(e) not in types:
            want = " or ".join(t.__name__ for t in types)
            raise AssertionError(f"{what}: raised {type(e).__name__}({e}), want {want}") from e
        if message is not None and str(e) != message:
            raise AssertionError(f"{what}: message {str(e)!r}, want {message!r}") from e
        if contains is not None and contains not in str(e):
            raise AssertionError(f"{what}: message {str(e)!r} does not contain {contains!r}") from e
        return e
    raise AssertionError(f"{what}: no error raised, want {' or '.join(t.__name__ for t in types)}")


class Checks:
    def __init__(self, host, port, password, tls=None):
        self.host, self.port, self.password = host, port, password
        self.tls = {}
        if tls:
            ca, cert, key = tls
            self.tls = dict(ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key)
        self.r = self.client(client_name="compat-py")
        self.clock = CLOCK_START_NS

    def client(self, **kw):
        opts = dict(host=self.host, port=self.port, password=self.password,
                    decode_responses=True, socket_timeout=10, socket_connect_timeout=10)
        opts.update(self.tls)
        opts.update(kw)
        return redis.Redis(**opts)

    def advance(self, ns):
        self.clock += ns
        eq("DEBUG CLOCK ADVANCE", self.r.execute_command("DEBUG", "CLOCK", "ADVANCE", ns), self.clock)

    def commandstats(self):
        """INFO commandstats as redis-py parses it: {cmd: {calls: n, ...}}."""
        info = self.r.info("commandstats")
        return {k[len("cmdstat_"):]: v for k, v in info.items()}

    # ---- sections -------------------------------------------------------

    def handshake(self):
        # AUTH (and CLIENT SETNAME for client_name) on connect; no HELLO.
        eq("PING", self.r.ping(), True)
        eq("CLIENT GETNAME", self.r.client_getname(), "compat-py")
        me = self.r.client_id()
        line = [c for c in self.r.client_list() if int(c["id"]) == me]
        eq("CLIENT LIST has this connection", len(line), 1)
        eq("CLIENT LIST name", line[0]["name"], "compat-py")
        eq("CLIENT LIST db", line[0]["db"], "0")
        info = self.r.info("server")
        eq("INFO redis_version", info["redis_version"], "7.0.15")
        eq("INFO redis_mode", info["redis_mode"], "standalone")
        eq("TIME", self.r.time(), (1_700_000_000, 0))
        eq("ECHO", self.r.echo("héllo wörld"), "héllo wörld")

        # A URL with a password and a database: AUTH then SELECT 2.
        scheme = "rediss" if self.tls else "redis"
        certs = {k: v for k, v in self.tls.items() if k != "ssl"}
        u = redis.Redis.from_url(f"{scheme}://:{self.password}@{self.host}:{self.port}/2",
                                 decode_responses=True, socket_timeout=10, **certs)
        eq("SET in db 2", u.set("only-in-2", "x"), True)
        eq("DBSIZE of db 2", u.dbsize(), 1)
        eq("GET in db 0", self.r.get("only-in-2"), None)
        eq("CLIENT INFO db", u.client_info()["db"], 2)
        eq("FLUSHDB db 2", u.flushdb(), True)
        u.close()

        # Wrong or missing password.
        # redis-py 4.3.4 raises WRONGPASS as a ResponseError; later
        # versions map it to AuthenticationError.
        raises("wrong password", (exceptions.ResponseError, exceptions.AuthenticationError),
               lambda: self.client(password="wrong").ping(),
               message="WRONGPASS invalid username-password pair or user is disabled.")
        raises("no password", exceptions.AuthenticationError,
               lambda: self.client(password=None).ping(),
               message="Authentication required.")
        # Bytes when responses are not decoded.
        b = self.client(decode_responses=False)
        b.set("bytes", "\xff\x00a")
        eq("GET as bytes", b.get("bytes"), "\xff\x00a".encode())
        b.delete("bytes")
        b.close()

    def strings(self):
        r = self.r
        eq("SET", r.set("greeting", "hello"), True)
        eq("GET", r.get("greeting"), "hello")
        eq("GET missing", r.get("missing"), None)
        eq("SET NX on an existing key", r.set("greeting", "x", nx=True), None)
        eq("SET XX", r.set("greeting", "hi", xx=True), True)
        eq("SET GET", r.set("greeting", "hey", get=True), "hi")
        eq("SETNX", r.setnx("fresh", 1), True)
        eq("SETNX again", r.setnx("fresh", 2), False)
        eq("MSET", r.mset({"m1": "a", "m2": "b"}), True)
        eq("MGET", r.mget("m1", "missing", "m2"), ["a", None, "b"])
        eq("GETDEL", r.getdel("m1"), "a")
        eq("EXISTS", r.exists("m1", "m2", "m2"), 2)
        eq("DELETE", r.delete("m2", "fresh", "missing"), 2)
        eq("TYPE", r.type("greeting"), "string")
        eq("KEYS", sorted(r.keys("*")), ["greeting"])
        eq("SCAN", sorted(r.scan_iter(match="gr*")), ["greeting"])

    def counters(self):
        r = self.r
        eq("INCR (INCRBY 1)", r.incr("n"), 1)
        eq("INCR by 5", r.incr("n", 5), 6)
        eq("INCRBY", r.incrby("n", 10), 16)
        eq("DECR", r.decr("n"), 15)
        eq("DECRBY", r.decrby("n", 20), -5)
        eq("GET counter", r.get("n"), "-5")
        r.set("text", "abc")
        raises("INCR on text", exceptions.ResponseError, lambda: r.incr("text"),
               message="value is not an integer or out of range")
        r.set("big", str(2**63 - 1))
        raises("INCR overflow", exceptions.ResponseError, lambda: r.incr("big"),
               message="increment or decrement would overflow")

    def expiry(self):
        r = self.r
        r.set("session", "s")
        eq("TTL without expiry", r.ttl("session"), -1)
        eq("TTL missing", r.ttl("nothing"), -2)
        eq("EXPIRE", r.expire("session", 10), True)
        eq("TTL", r.ttl("session"), 10)
        eq("PTTL", r.pttl("session"), 10_000)
        eq("EXPIRE missing", r.expire("nothing", 10), False)
        self.advance(9_500_000_000)
        eq("PTTL after 9.5 s", r.pttl("session"), 500)
        eq("TTL rounds", r.ttl("session"), 1)
        self.advance(500_000_000)
        # As in Redis, a key expires once the clock is past its deadline.
        eq("GET at the deadline", r.get("session"), "s")
        eq("PTTL at the deadline", r.pttl("session"), 0)
        self.advance(1_000_000)
        eq("GET past the deadline", r.get("session"), None)
        eq("SET EX", r.set("tok", "t", ex=30), True)
        eq("SET PX", r.set("tok2", "t", px=1500), True)
        eq("PTTL PX", r.pttl("tok2"), 1500)
        eq("SETEX", r.setex("tok3", 7, "t"), True)
        eq("TTL SETEX", r.ttl("tok3"), 7)
        eq("PERSIST", r.persist("tok"), True)
        eq("TTL after PERSIST", r.ttl("tok"), -1)
        eq("EXPIREAT", r.expireat("tok", 1_700_000_100), True)
        eq("TTL EXPIREAT", r.ttl("tok"), 90)
        eq("PEXPIRE", r.pexpire("tok", 2500), True)
        eq("PTTL PEXPIRE", r.pttl("tok"), 2500)

    def pipelines(self):
        r = self.r
        # pipeline() is a MULTI/EXEC transaction by default.
        with r.pipeline() as p:
            p.set("p:a", 1).incr("p:a").get("p:a").expire("p:a", 5).ttl("p:a")
            eq("transaction", p.execute(), [True, 2, "2", True, 5])
        # And a plain pipeline without MULTI.
        with r.pipeline(transaction=False) as p:
            for i in range(100):
                p.incr("p:n")
            p.get("p:n")
            res = p.execute()
            eq("pipeline of 101", res[-2:], [100, "100"])
        # An error inside EXEC is returned for its command; the others run.
        r.set("p:text", "x")
        with r.pipeline() as p:
            p.set("p:b", 1).incr("p:text").incr("p:b")
            raises("EXEC with a failing command", exceptions.ResponseError, p.execute,
                   contains="value is not an integer or out of range")
        eq("the others ran", r.get("p:b"), "2")
        with r.pipeline() as p:
            p.set("p:c", 1).incr("p:text").incr("p:c")
            res = p.execute(raise_on_error=False)
            eq("results", res[0::2], [True, 2])
            eq("error result", type(res[1]), exceptions.ResponseError)
        # A command refused while queuing aborts the whole transaction.
        with r.pipeline() as p:
            p.set("p:d", 1).execute_command("INCR")  # wrong arity
            raises("EXECABORT", exceptions.ResponseError, p.execute,
                   contains="wrong number of arguments for 'incr' command")
        eq("nothing ran", r.exists("p:d"), 0)

    def transactions(self):
        r = self.r
        other = self.client()
        r.set("balance", 100)
        calls = []

        def debit(pipe):
            balance = int(pipe.get("balance"))
            if not calls:
                # Another client writes after our WATCH: EXEC must fail
                # and redis-py must run us again.
                other.incrby("balance", 50)
            calls.append(balance)
            pipe.multi()
            pipe.set("balance", balance - 30)

        eq("transaction()", r.transaction(debit, "balance"), [True])
        eq("runs of the transaction", calls, [100, 150])
        eq("balance", r.get("balance"), "120")

        with r.pipeline() as p:
            p.watch("balance")
            other.set("balance", 0)
            p.multi()
            p.set("balance", 1)
            raises("EXEC after a watched change", exceptions.WatchError, p.execute)
        eq("balance kept", r.get("balance"), "0")
        # A watched key that expires also fails the EXEC.
        r.set("lease", "me", px=100)
        with r.pipeline() as p:
            p.watch("lease")
            self.advance(101_000_000)
            p.multi()
            p.set("lease", "again")
            raises("EXEC after a watched key expired", exceptions.WatchError, p.execute)
        other.close()

    def throttle(self):
        r = self.r
        # redis-cell's README example, then vector V04 on the clock.
        eq("CL.THROTTLE", r.execute_command("CL.THROTTLE", "user123", 15, 30, 60), [0, 16, 15, -1, 2])
        eq("GET the TAT", r.get("user123"), str(self.clock + 2_000_000_000))
        eq("PTTL of the TAT", r.pttl("user123"), 2000)
        steps = [
            (0, [4, 1, 1, 6], [1, 5, 5, -1, 0]),
            (0, [4, 1, 1], [0, 5, 4, -1, 1]),
            (0, [4, 1, 1], [0, 5, 3, -1, 2]),
            (0, [4, 1, 1], [0, 5, 2, -1, 3]),
            (0, [4, 1, 1], [0, 5, 1, -1, 4]),
            (0, [4, 1, 1], [0, 5, 0, -1, 5]),
            (0, [4, 1, 1], [1, 5, 0, 1, 5]),
            (3000, [4, 1, 1, 1], [0, 5, 2, -1, 3]),
            (100, [4, 1, 1, 1], [0, 5, 1, -1, 4]),
            (900, [4, 1, 1, 1], [0, 5, 1, -1, 4]),
            (4000, [4, 1, 1, 1], [0, 5, 4, -1, 1]),
            (1500, [4, 1, 1, 1], [0, 5, 4, -1, 1]),
            (0, [4, 1, 1, 0], [0, 5, 4, -1, 1]),
            (0, [4, 1, 1, 2], [0, 5, 2, -1, 3]),
            (0, [4, 1, 1, 5], [1, 5, 2, 3, 3]),
        ]
        for i, (ms, args, want) in enumerate(steps):
            if ms:
                self.advance(ms * 1_000_000)
            eq(f"V04 step {i}", r.execute_command("CL.THROTTLE", "foo", *args), want)
        # Pipelined throttles, as a gateway batches them.
        with r.pipeline(transaction=False) as p:
            for _ in range(3):
                p.execute_command("CL.THROTTLE", "batch", 1, 1, 10)
            eq("pipelined CL.THROTTLE", p.execute(),
               [[0, 2, 1, -1, 10], [0, 2, 0, -1, 20], [1, 2, 0, 10, 20]])
        raises("CL.THROTTLE usage", exceptions.ResponseError,
               lambda: r.execute_command("CL.THROTTLE", "k", 1, 2),
               message="Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
        raises("CL.THROTTLE zero rate", exceptions.ResponseError,
               lambda: r.execute_command("CL.THROTTLE", "k", 1, 0, 3),
               message="Cell error: Store error: Zero rates are not supported")

    def native(self):
        r = self.r
        r.execute_command("DEBUG", "CLOCK", "SET", CLOCK_START_NS)
        self.clock = CLOCK_START_NS
        # Fixed window of 60 s aligned to the epoch: 1700000000 is 20 s into
        # its window, so it resets in 40 s.
        fwc = lambda *q: r.execute_command("FWC.THROTTLE", "api:alice", 3, 60, *q)
        eq("FWC 1", fwc(), [0, 3, 2, -1, 40])
        eq("FWC 2", fwc(), [0, 3, 1, -1, 40])
        eq("FWC 2 more", fwc(2), [1, 3, 1, 40, 40])
        eq("FWC peek", fwc(0), [0, 3, 1, -1, 40])
        eq("TYPE fwc", r.type("api:alice"), "fwc")
        raises("GET on a fwc key", exceptions.ResponseError, lambda: r.get("api:alice"),
               message="WRONGTYPE Operation against a key holding the wrong kind of value")
        self.advance(40_000_000_000)
        eq("FWC next window", fwc(), [0, 3, 2, -1, 60])
        # Token bucket of 5, refilled 1 per 2 s.
        tb = lambda *q: r.execute_command("TB.THROTTLE", "bucket", 5, 1, 2, *q)
        eq("TB 1", tb(), [0, 5, 4, -1, 2])
        eq("TB 4", tb(4), [0, 5, 0, -1, 10])
        eq("TB empty", tb(), [1, 5, 0, 2, 10])
        eq("TTL tb", r.ttl("bucket"), 10)
        self.advance(2_000_000_000)
        eq("TB refilled one", tb(), [0, 5, 0, -1, 10])
        raises("TB bad capacity", exceptions.ResponseError,
               lambda: r.execute_command("TB.THROTTLE", "bucket", 0, 1, 2),
               message="capacity must be a positive integer")
        raises("FWC on a tb key", exceptions.ResponseError,
               lambda: r.execute_command("FWC.THROTTLE", "bucket", 3, 60),
               contains="WRONGTYPE")
        # Several limits at once.
        eq("THROTTLE.ALL", r.execute_command("THROTTLE.ALL", "LIMIT", "FWC", "all:a", 2, 60,
                                             "LIMIT", "TB", "all:b", 1, 1, 1),
           [0, [0, 2, 1, -1, 58], [0, 1, 0, -1, 1]])
        eq("THROTTLE.ALL refused", r.execute_command("THROTTLE.ALL", "LIMIT", "FWC", "all:a", 2, 60,
                                                     "LIMIT", "TB", "all:b", 1, 1, 1),
           [1, [0, 2, 1, -1, 58], [1, 1, 0, 1, 1]])

    def scripts(self):
        r = self.r
        eq("SCRIPT FLUSH", r.script_flush(), True)
        eq("EVAL", r.eval("return {KEYS[1], ARGV[1], 3.9, true, false}", 1, "k", "a"),
           ["k", "a", 3, 1, None])
        # A limiter written as a script: register_script sends EVALSHA,
        # gets NOSCRIPT, sends SCRIPT LOAD, then EVALSHA again.
        limiter = r.register_script("""
            local n = redis.call('INCR', KEYS[1])
            if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
            if n > tonumber(ARGV[1]) then return {0, redis.call('TTL', KEYS[1])} end
            return {1, tonumber(ARGV[1]) - n}
        """)
        before = self.commandstats()
        eq("script 1", limiter(keys=["ip:1"], args=[2, 60]), [1, 1])
        eq("script 2", limiter(keys=["ip:1"], args=[2, 60]), [1, 0])
        eq("script 3", limiter(keys=["ip:1"], args=[2, 60]), [0, 60])
        after = self.commandstats()
        calls = lambda cmd, what="calls": after.get(cmd, {}).get(what, 0) - before.get(cmd, {}).get(what, 0)
        eq("EVALSHA calls", calls("evalsha"), 4)
        eq("EVALSHA failed calls (the NOSCRIPT)", calls("evalsha", "failed_calls"), 1)
        eq("EVAL calls", calls("eval"), 0)
        eq("SCRIPT EXISTS", r.script_exists(limiter.sha, "0" * 40), [True, False])
        eq("TTL set by the script", r.ttl("ip:1"), 60)
        # After SCRIPT FLUSH the client loads it again by itself.
        r.script_flush()
        eq("script after SCRIPT FLUSH", limiter(keys=["ip:2"], args=[5, 10]), [1, 4])
        # In a pipeline redis-py checks SCRIPT EXISTS and loads what is missing.
        r.script_flush()
        with r.pipeline() as p:
            limiter(keys=["ip:3"], args=[1, 10], client=p)
            limiter(keys=["ip:3"], args=[1, 10], client=p)
            eq("script in a pipeline", p.execute(), [[1, 0], [0, 10]])
        # Errors raised by scripts.
        raises("error_reply", exceptions.ResponseError,
               lambda: r.eval("return redis.error_reply('my error')", 0), message="my error")
        incr = "return redis.call('INCR', KEYS[1])"
        raises("redis.call error", exceptions.ResponseError,
               lambda: r.eval(incr, 1, "greeting"),
               message="value is not an integer or out of range script: "
                       f"{hashlib.sha1(incr.encode()).hexdigest()}, on @user_script:1.")
        raises("EVALSHA unknown", exceptions.NoScriptError,
               lambda: r.evalsha("0" * 40, 0), message="No matching script. Please use EVAL.")
        # TIME inside a script is the command's clock.
        eq("TIME in a script", r.eval("return redis.call('TIME')", 0), [str(self.clock // 10**9), "0"])

    def commandstats_subcommands(self):
        # Redis 7 counts a container command's subcommands apart, as
        # cmdstat_script|load, and monitoring reads them so.
        r = self.r
        before = self.commandstats()
        r.script_load("return 1")
        r.config_get("maxmemory")
        after = self.commandstats()
        calls = lambda cmd: after.get(cmd, {}).get("calls", 0) - before.get(cmd, {}).get("calls", 0)
        eq("cmdstat_script|load calls", calls("script|load"), 1)
        eq("cmdstat_config|get calls", calls("config|get"), 1)
        eq("cmdstat_script (no such entry in Redis 7)", "script" in after, False)

    def errors(self):
        r = self.r
        raises("unknown command", exceptions.ResponseError,
               lambda: r.execute_command("NOSUCH", "a"),
               message="unknown command 'NOSUCH', with args beginning with: 'a' ")
        raises("wrong arity", exceptions.ResponseError,
               lambda: r.execute_command("GET"),
               message="wrong number of arguments for 'get' command")
        raises("SELECT out of range", exceptions.ResponseError,
               lambda: self.client(db=99).ping(), message="DB index is out of range")
        raises("syntax", exceptions.ResponseError,
               lambda: r.execute_command("SET", "k", "v", "BOGUS"), message="syntax error")
        # The connection is still usable after errors.
        eq("PING after errors", r.ping(), True)

    def concurrency(self):
        # Threads sharing one client (its connection pool) on one limiter:
        # exactly the burst passes.
        r = self.r
        results = []
        lock = threading.Lock()

        def worker():
            res = r.execute_command("CL.THROTTLE", "threads", 9, 1, 60)
            with lock:
                results.append(res[0])

        threads = [threading.Thread(target=worker) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        eq("allowed across threads", results.count(0), 10)
        eq("limited across threads", results.count(1), 10)


def main():
    if len(sys.argv) not in (4, 7):
        sys.exit("usage: redispy_compat.py HOST PORT PASSWORD [CA CERT KEY]")
    host, port, password = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    c = Checks(host, port, password, sys.argv[4:])
    print(f"redis-py {redis.__version__} on Python {sys.version.split()[0]}{' over TLS' if c.tls else ''}")
    failed = []
    # Sections use their own keys, so one failing does not hide the others.
    for name in ["handshake", "strings", "counters", "expiry", "pipelines", "transactions",
                 "throttle", "native", "scripts", "commandstats_subcommands", "errors", "concurrency"]:
        try:
            getattr(c, name)()
        except Exception:
            failed.append(name)
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
            continue
        print(f"ok {name}")
    if failed:
        print(f"redis-py checks failed: {', '.join(failed)}")
        sys.exit(1)
    print("all redis-py checks passed")

if __name__ == "__main__":
    main()
