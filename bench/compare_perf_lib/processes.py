"""Process handling for compare_perf: every child runs in its own process group with a
timeout and is killed with its group on timeout, failure or interruption; servers are
started, waited for (listening, checked in /proc) and killed when their client ends."""

import os
import signal
import socket
import subprocess
import time

from .constants import LOOPBACK


_LIVE = set()


def _kill_group(proc, grace=2.0):
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    else:
        # The leader exited; make sure nothing it started lingers in its group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _LIVE.discard(proc)


def cleanup_all():
    for proc in list(_LIVE):
        _kill_group(proc, grace=0.5)


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


class Spawned:
    """A child in its own session/process group with stdout+stderr captured to files."""

    def __init__(self, cmd, env=None, cwd=None):
        import tempfile
        self.cmd = cmd
        self._out = tempfile.TemporaryFile()
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err, env=env, cwd=cwd,
                                     start_new_session=True)
        _LIVE.add(self.proc)
        self.timed_out = False

    def wait(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
        self.kill()
        return self.proc.returncode

    def kill(self):
        _kill_group(self.proc)

    def output(self):
        res = []
        for f in (self._out, self._err):
            f.seek(0)
            res.append(f.read().decode("utf-8", "replace"))
        return res

    def close(self):
        self.kill()
        self._out.close()
        self._err.close()


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _listening_inodes(port):
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9 and parts[3] == "0A" and \
                            int(parts[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(parts[9])
        except OSError:
            return None
    return inodes


def _pid_socket_inodes(pid):
    res = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                res.add(link[8:-1])
    except OSError:
        return None
    return res


def wait_until_listening(server, port, timeout):
    """Waits until `server` itself listens on `port` (checked in /proc, without connecting:
    both tools' servers accept exactly one connection). Returns None or an error string."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return "server exited early with status %s" % server.proc.returncode
        listening = _listening_inodes(port)
        mine = _pid_socket_inodes(server.proc.pid)
        if listening is None or mine is None:
            time.sleep(1.0)  # no /proc: give the server a moment and hope for the best
            return None
        if listening & mine:
            return None
        time.sleep(0.05)
    return "server did not listen on port %d within %.0f s" % (port, timeout)


def run_server_client(server_cmd, client_cmd, port, env, timeout):
    """Starts the server, waits for it to listen, runs the client with a timeout, then
    gives the server a few seconds to finish by itself and kills it (and its group)."""
    res = {"server_cmd": server_cmd, "client_cmd": client_cmd, "error": None}
    server = client = None
    try:
        server = Spawned(server_cmd, env=env)
        err = wait_until_listening(server, port, min(15.0, timeout))
        if err:
            res["error"] = err
            return res
        client = Spawned(client_cmd, env=env)
        rc = client.wait(timeout)
        res["client_rc"] = rc
        if client.timed_out:
            res["error"] = "client timed out after %.0f s (killed)" % timeout
        elif rc != 0:
            res["error"] = "client exited with status %s" % rc
        server.wait(5.0 if not client.timed_out else 0.1)
        res["server_rc"] = server.proc.returncode
        res["server_killed"] = server.timed_out
        return res
    finally:
        for name, sp in (("client", client), ("server", server)):
            if sp is not None:
                sp.kill()
                res[name + "_stdout"], res[name + "_stderr"] = sp.output()
                sp.close()


def tail(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])
