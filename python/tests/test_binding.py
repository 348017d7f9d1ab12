# SPDX-License-Identifier: MIT
"""The binding in one process: errors of every kind, argument checking,
every config field, keys, the log callback, and the GIL while a call
blocks."""

import ctypes
import threading
import time

import numpy as np
import pytest

import moshpit
from moshpit import _abi


@pytest.fixture
def peer():
    p = moshpit.Peer(swarm="py-binding", matchmaking_ms=300, round_timeout_ms=5000)
    yield p
    p.close()


def test_version_and_keys():
    assert moshpit.version().count(".") == 2
    pub, sec = moshpit.keypair()
    assert len(pub) == 32 and len(sec) == 32 and pub != sec
    text = moshpit.key_to_text(pub)
    assert len(text) == 40
    assert moshpit.key_from_text(text) == pub
    assert moshpit.keypair()[0] != pub


def test_key_errors():
    with pytest.raises(moshpit.MoshpitError) as e:
        moshpit.key_from_text("\"" * 40)  # not in the Z85 alphabet
    assert e.value.code == moshpit.EINVAL
    assert e.value.name == "EINVAL"
    assert e.value.message == "invalid argument"
    assert "invalid argument" in str(e.value)
    with pytest.raises(ValueError):
        moshpit.key_from_text("abc")
    with pytest.raises(ValueError):
        moshpit.key_to_text(b"short")
    with pytest.raises(TypeError):
        moshpit.key_to_text(1234)


def test_open_errors_from_the_library():
    # values of the right type that the C library refuses
    for bad in (
        dict(group_size=65),
        dict(grid_dims=9),
        dict(aggregation=7),
        dict(compression=5),
        dict(data_streams=17),
        dict(sessions_max=1),
        dict(sessions_max=65537),
        dict(shared_memory=2),
        dict(congestion="mp_no_such_cc"),
        dict(congestion="not a name"),
        dict(listen="udp://nowhere"),
        dict(bootstrap=["not an endpoint"]),
    ):
        with pytest.raises(moshpit.MoshpitError) as e:
            moshpit.Peer(swarm="py-bad", **bad)
        assert e.value.code == moshpit.EINVAL, bad
    with pytest.raises(moshpit.MoshpitError) as e:
        moshpit.Peer(swarm="")
    assert e.value.code == moshpit.EINVAL


def test_open_errors_from_the_binding():
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", no_such_field=1)
    with pytest.raises(TypeError):
        moshpit.Peer(swarm=None)
    with pytest.raises(TypeError):
        moshpit.Peer(swarm=b"bytes")
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", group_size="8")
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", group_size=8.0)
    with pytest.raises(ValueError):
        moshpit.Peer(swarm="x", group_size=-1)
    with pytest.raises(ValueError):
        moshpit.Peer(swarm="x", matchmaking_ms=2**32)
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", bootstrap=[1])
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", bootstrap=5)
    with pytest.raises(ValueError):
        moshpit.Peer(swarm="x\0y")
    with pytest.raises(ValueError):
        moshpit.Peer(swarm="x", swarm_secret=b"too short")
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", swarm_secret=12)
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", authorized_keys=b"\0" * 32)
    with pytest.raises(ValueError):
        moshpit.Peer(swarm="x", authorized_keys=[b"\1" * 32], authorized_count=2)
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", log="print")
    with pytest.raises(TypeError):
        moshpit.Peer(swarm="x", clip_tau="1")


def test_every_config_field_reaches_the_struct():
    pub, sec = moshpit.keypair()
    other = moshpit.keypair()[0]
    apub, asec = moshpit.authority_keypair()
    cert = moshpit.cert_issue(asec, pub, "py-all", int(time.time()) + 3600)
    secret = bytes(range(32))
    config = dict(
        swarm="py-all",
        listen="tcp://127.0.0.1:0",
        advertise="tcp://127.0.0.1",
        bootstrap=[],
        public_key=pub,
        secret_key=moshpit.key_to_text(sec),  # keys as text work too
        swarm_secret=secret,
        authorized_keys=[other, moshpit.key_to_text(pub)],
        authorized_count=2,
        group_size=5,
        min_group_size=3,
        grid_position=-1,
        matchmaking_ms=1234,
        round_timeout_ms=4321,
        log=lambda user, level, msg: None,
        log_user=None,
        log_level=moshpit.LOG_DEBUG,
        peer_timeout_ms=3000,
        bandwidth_mbps=77,
        grid_dims=1,
        serve_state=1,
        state_clients_max=3,
        aggregation=moshpit.AGG_TRIMMED_MEAN,
        trim=2,
        clip_tau=0.5,
        clip_iters=7,
        weight_cap=9,
        authority_key=apub,
        cert=cert,
        peers_max=100,
        peer_msg_rate=500,
        compression=moshpit.COMPRESS_INT8,
        data_streams=3,
        congestion="reno",
        sessions_max=16,
        shared_memory=moshpit.SHM_OFF,
    )
    assert set(config) == set(moshpit.CONFIG_FIELDS)
    cfg, keep = moshpit.build_config(config)
    for name, value in config.items():
        got = getattr(cfg, name)
        if name in ("swarm", "listen", "advertise", "congestion"):
            assert got == value.encode()
        elif name in ("public_key", "swarm_secret", "authority_key", "cert"):
            assert bytes(got) == value
        elif name == "secret_key":
            assert bytes(got) == sec
        elif name == "bootstrap":
            assert got[0] is None
        elif name == "authorized_keys":
            assert bytes(got[0]) == other and bytes(got[1]) == pub
        elif name == "log":
            assert ctypes.cast(got, ctypes.c_void_p).value
        elif name == "log_user":
            pass
        elif name == "clip_tau":
            assert got == pytest.approx(0.5)
        else:
            assert got == value, name
    # and the library accepts the whole set
    with moshpit.Peer(**config) as p:
        assert p.endpoint.endswith("#" + moshpit.key_to_text(pub))


def test_defaults_come_from_the_library():
    cfg, _ = moshpit.build_config({"swarm": "d"})
    assert cfg.group_size == 8
    assert cfg.min_group_size == 2
    assert cfg.grid_position == -1
    assert cfg.round_timeout_ms == 30000
    assert cfg.log_level == moshpit.LOG_WARN


def test_log_callback_runs_with_user_object():
    seen = []
    user = object()
    with moshpit.Peer(swarm="py-log") as first, moshpit.Peer(
        swarm="py-log",
        bootstrap=[first.endpoint],
        log=lambda u, level, msg: seen.append((u, level, msg)),
        log_user=user,
        log_level=moshpit.LOG_DEBUG,
    ) as p:
        p.wait_members(2, timeout=10.0)  # joining is logged at debug level
    assert seen, "no log message at debug level"
    assert all(u is user for u, _, _ in seen)
    assert all(isinstance(m, str) and 0 <= lv <= 3 for _, lv, m in seen)


def test_wrong_dtypes_and_shapes(peer):
    with pytest.raises(TypeError):
        peer.average(np.zeros(8, np.float64))
    with pytest.raises(TypeError):
        peer.average(np.zeros(8, np.int32))
    with pytest.raises(TypeError):
        peer.average([1.0, 2.0])
    with pytest.raises(TypeError):
        peer.average(b"\0" * 32)
    with pytest.raises(ValueError):
        peer.average(np.zeros((4, 6), np.float32).T)  # not C-contiguous
    with pytest.raises(ValueError):
        peer.average(np.zeros(16, np.float32)[::2])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        peer.average(ro)
    with pytest.raises(TypeError):
        peer.average(np.zeros(8, np.float32), weight="1")
    with pytest.raises(TypeError):
        peer.average(np.zeros(8, np.float32), weight=None)


def test_bad_values_and_weights(peer):
    for w in (-1.0, float("nan"), float("inf"), 2 * moshpit.WEIGHT_MAX):
        with pytest.raises(moshpit.MoshpitError) as e:
            peer.average(np.ones(8, np.float32), weight=w)
        assert e.value.code == moshpit.EINVAL, w
    x = np.ones(8, np.float32)
    x[3] = np.nan
    with pytest.raises(moshpit.MoshpitError) as e:
        peer.average(x)
    assert e.value.code == moshpit.EINVAL


def test_alone_any_shape_untouched(peer):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    before = x.copy()
    info = peer.average(x, weight=2.0)
    assert isinstance(info, moshpit.RoundInfo)
    assert info.group_size == 1
    assert info.round_id == 0
    assert np.array_equal(x, before)
    assert set(info._asdict()) == {n for n, _ in _abi.Round._fields_}


def test_wait_and_fetch_errors(peer):
    assert peer.members == 1
    t0 = time.monotonic()
    with pytest.raises(moshpit.MoshpitError) as e:
        peer.wait_members(2, timeout=0.3)
    assert e.value.code == moshpit.ETIMEDOUT
    assert time.monotonic() - t0 >= 0.25
    with pytest.raises(moshpit.MoshpitError) as e:
        peer.fetch_state(np.zeros(4, np.float32), timeout=0.3)
    assert e.value.code in (moshpit.ENOSTATE, moshpit.ETIMEDOUT)
    with pytest.raises(ValueError):
        peer.wait_members(2, timeout=-1)
    with pytest.raises(TypeError):
        peer.wait_members(2, timeout="1")
    with pytest.raises(TypeError):
        peer.fetch_state(np.zeros(4, np.float64))


def test_closed_peer():
    p = moshpit.Peer(swarm="py-closed")
    assert not p.closed
    p.close()
    p.close()  # idempotent
    assert p.closed
    with pytest.raises(moshpit.MoshpitError) as e:
        p.average(np.zeros(4, np.float32))
    assert e.value.code == moshpit.ECLOSED
    with pytest.raises(moshpit.MoshpitError):
        p.endpoint
    with pytest.raises(moshpit.MoshpitError):
        p.wait_members(1)


def test_gil_released_while_blocking(peer):
    """wait_members blocks in C for 1.5 s; another Python thread must keep
    running meanwhile."""
    ticks = [0]
    done = threading.Event()

    def blocked():
        try:
            peer.wait_members(2, timeout=1.5)
        except moshpit.MoshpitError:
            pass
        done.set()

    t = threading.Thread(target=blocked)
    t.start()
    while not done.is_set():
        ticks[0] += 1
        time.sleep(0.001)
    t.join()
    assert ticks[0] >= 20


def test_close_waits_for_a_call_in_progress():
    p = moshpit.Peer(swarm="py-close-race")
    started = threading.Event()
    result = []

    def blocked():
        started.set()
        try:
            p.wait_members(2, timeout=1.0)
        except moshpit.MoshpitError as e:
            result.append(e.code)

    t = threading.Thread(target=blocked)
    t.start()
    started.wait()
    while p._active == 0 and t.is_alive():
        time.sleep(0.001)
    p.close()
    assert not t.is_alive() or t.join(5) is None
    t.join()
    assert result == [moshpit.ETIMEDOUT]


def test_compression_int8_two_peers():
    """Two INT8 peers average: both end with the same bits, within the
    format's step of the exact mean, and send about a quarter of the bytes
    of float32; a peer without compression never groups with them."""
    cfg = dict(group_size=2, matchmaking_ms=10000, round_timeout_ms=20000)
    a = moshpit.Peer(swarm="py-compress", compression=moshpit.COMPRESS_INT8, **cfg)
    b = moshpit.Peer(
        swarm="py-compress",
        compression=moshpit.COMPRESS_INT8,
        bootstrap=[a.endpoint],
        **cfg
    )
    try:
        a.wait_members(2, timeout=20.0)
        b.wait_members(2, timeout=20.0)
        n = 100000
        xa = np.sin(np.arange(n, dtype=np.float32))
        xb = np.cos(np.arange(n, dtype=np.float32)) * 2
        want = (xa.astype(np.float64) + xb) / 2
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("a", a.average(xa)))
        t.start()
        info = b.average(xb)
        t.join()
        assert info.group_size == 2 and out["a"].group_size == 2
        assert np.array_equal(xa, xb)  # identical bits on both peers
        # one round: at most a step (largest |x| / 127) off the exact mean
        assert np.max(np.abs(xb - want)) <= 2.0 / 127 * 1.0001
        # half the vector out as INT8 (1 + 4/64 bytes a value) plus frames
        assert info.bytes_sent < n * 4 * 0.3
    finally:
        b.close()
        a.close()


def test_fetch_state_from_a_serving_peer():
    """Two serving peers average once; a third fetches that result, and a
    buffer of another length is refused with ECOUNT."""
    cfg = dict(group_size=2, matchmaking_ms=10000, round_timeout_ms=20000)
    a = moshpit.Peer(swarm="py-state", serve_state=1, **cfg)
    b = moshpit.Peer(swarm="py-state", serve_state=1, bootstrap=[a.endpoint], **cfg)
    try:
        a.wait_members(2, timeout=20.0)
        b.wait_members(2, timeout=20.0)
        xa = np.linspace(0, 1, 300, dtype=np.float32)
        xb = np.linspace(5, -5, 300, dtype=np.float32)
        want = (xa.astype(np.float64) + xb) / 2
        t = threading.Thread(target=lambda: a.average(xa))
        t.start()
        info = b.average(xb)
        t.join()
        assert info.group_size == 2
        with moshpit.Peer(swarm="py-state", bootstrap=[a.endpoint]) as c:
            c.wait_members(3, timeout=20.0)
            got = np.zeros(300, np.float32)
            rounds = c.fetch_state(got, timeout=20.0)
            assert rounds >= 1
            assert np.allclose(got, want, atol=1e-6)
            with pytest.raises(moshpit.MoshpitError) as e:
                c.fetch_state(np.zeros(299, np.float32), timeout=20.0)
            assert e.value.code == moshpit.ECOUNT
    finally:
        b.close()
        a.close()


def test_exit_without_close_is_clean():
    """A program that leaves peers open (one with a log callback whose
    engine logs at debug level, one in a reference cycle) exits with
    status 0 and its output intact."""
    import os
    import subprocess
    import sys

    code = (
        "import moshpit\n"
        "a = moshpit.Peer(swarm='py-exit', log=lambda u, l, m: None, log_level=3)\n"
        "b = moshpit.Peer(swarm='py-exit', bootstrap=[a.endpoint])\n"
        "b.self_ref = b\n"
        "b.wait_members(2, timeout=20.0)\n"
        "print('open', a.members)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(moshpit.__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "open 2"
