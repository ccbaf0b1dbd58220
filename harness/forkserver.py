"""A batch's pair processes without a torch import each: one server process imports torch,
check.py and bench.py once, then forks a child per pair (Linux only).

A child is still a process of its own: it crashes, hangs and is killed alone, and it holds only
what the server imported, never an earlier pair's state. The server touches no CUDA (a forked
child could not use it), so each child starts its own CUDA context, on the GPU its environment
names. `ForkServer.start` returns an object that waits and kills as subprocess.Popen does.

    python -m harness.forkserver   # the server: requests on stdin, pids and exit statuses on stdout
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("check.py", "bench.py")
COMMAND = [sys.executable, "-m", "harness.forkserver"]


def available() -> bool:
    """Forking after torch's import is safe on Linux (no CUDA context yet); elsewhere a pair gets a fresh Python."""
    return sys.platform.startswith("linux")


def _send(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def serve():
    """Fork a child per request line of stdin, reply {"id", "pid"} on stdout, then {"pid", "status"}
    when it ends. In a child, return the tool's main and its arguments; in the server, return None
    once the requests end (their sender is gone)."""
    import importlib
    import warnings

    requests, replies = 0, os.dup(1)
    os.dup2(2, 1)  # anything an import prints goes to stderr, not into the replies

    # The point: every child starts with torch imported, and torch._dynamo, which the check's
    # meta-tensor run imports (1-2 s a pair otherwise).
    import torch._dynamo

    mains = {tool: importlib.import_module(Path(tool).stem).main for tool in TOOLS}
    if torch.cuda.is_initialized():  # a forked child could not use CUDA
        raise RuntimeError("the fork server's imports started CUDA")
    # torch's import leaves a native thread that holds no lock a child needs (DataLoader forks likewise).
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
    pending, running = b"", 0
    while True:
        ready, _, _ = select.select([requests], [], [], 0.05)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            running -= 1
            _send(replies, {"pid": pid, "status": status})
        if not ready:
            continue
        chunk = os.read(requests, 65536)
        if not chunk:
            return None
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                os.close(requests)
                os.close(replies)
                return _become_child(request, mains)
            running += 1
            _send(replies, {"id": request["id"], "pid": pid})


def _become_child(request: dict, mains: dict):
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = request["argv"][1:]  # [check.py or bench.py, its arguments]
    return mains[Path(sys.argv[0]).name], sys.argv[1:]


class ForkedProcess:
    """A forked pair process, waited for and killed as subprocess.Popen's are (text stdout and stderr)."""

    def __init__(self, server: "_Server", pid: int, stdout: Path, stderr: Path):
        self._server, self.pid, self._stdout, self._stderr = server, pid, stdout, stderr
        self.returncode = None
        self._orphaned = False  # its server ended first

    def _ended(self) -> bool:  # with the server's lock held
        status = self._server.statuses.pop(self.pid, None)
        if status is not None:
            self.returncode = os.waitstatus_to_exitcode(status)
        elif self._server.gone and self.returncode is None:  # nobody left to reap it: end it here
            self._kill_unreaped()
            self.returncode, self._orphaned = -signal.SIGKILL, True
        return self.returncode is not None

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        with self._server.changed:
            if not self._server.changed.wait_for(self._ended, timeout):
                raise subprocess.TimeoutExpired(COMMAND, timeout)
        out, err = (p.read_text(errors="replace") if p.exists() else "" for p in (self._stdout, self._stderr))
        if self._orphaned:
            err += "\n[batch] the fork server ended before this pair's process did\n"
        return out, err

    def kill(self) -> None:
        with self._server.changed:
            if not self._ended():  # not reaped yet, so the pid is still this process's
                self._kill_unreaped()

    def _kill_unreaped(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _Server:
    """One server process and the thread that reads its replies."""

    def __init__(self):
        self.proc = subprocess.Popen(COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
        self.changed = threading.Condition()
        self.statuses: dict[int, int] = {}  # pid -> wait status, until its ForkedProcess takes it
        self.pids: dict[int, int] = {}  # request id -> pid, until start() takes it
        self.gone = False
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _read_replies(self) -> None:
        for line in self.proc.stdout:
            reply = json.loads(line)
            with self.changed:
                if "id" in reply:
                    self.pids[reply["id"]] = reply["pid"]
                else:
                    self.statuses[reply["pid"]] = reply["status"]
                self.changed.notify_all()
        with self.changed:
            self.gone = True
            self.changed.notify_all()


class ForkServer:
    """Forks the batch's pair processes; its server process starts with the first pair, and again
    after one ended (a pair may kill it): the pairs it was running end as crashes."""

    def __init__(self):
        self._server: _Server | None = None
        self._lock = threading.Lock()
        self._next_id = 0

    def start(self, cmd: list[str], env: dict, cwd: Path, out_dir: Path) -> ForkedProcess:
        """Fork `cmd` ([python, check.py or bench.py, arguments...]) with `env` in `cwd`; its
        stdout and stderr go to files in `out_dir`."""
        if Path(cmd[1]).name not in TOOLS:
            raise ValueError(f"the fork server runs {' or '.join(TOOLS)}, not {cmd[1]}")
        stdout, stderr = out_dir / "stdout.txt", out_dir / "stderr.txt"
        with self._lock:
            if self._server is None or self._server.gone:
                self._server = _Server()
            server = self._server
            self._next_id += 1
            ident = self._next_id
        request = {"id": ident, "argv": cmd, "env": env, "cwd": str(cwd), "stdout": str(stdout), "stderr": str(stderr)}
        with server.changed:
            try:
                server.proc.stdin.write((json.dumps(request) + "\n").encode())
                server.proc.stdin.flush()
            except BrokenPipeError:
                pass  # it ended: the wait below says so
            server.changed.wait_for(lambda: ident in server.pids or server.gone)
            if ident not in server.pids:
                raise RuntimeError("the batch's fork server ended before it started a pair")
            return ForkedProcess(server, server.pids.pop(ident), stdout, stderr)

    def close(self) -> None:
        if self._server is not None and not self._server.gone:
            self._server.proc.stdin.close()  # the server returns once its requests end
            self._server.proc.wait()


def exit_without_teardown(code: int | None):
    """What the interpreter's exit does, without freeing every module's objects (0.7 s with torch
    loaded): wait for the threads, run the atexit functions, flush, exit."""
    import atexit

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    started = serve()
    if started is not None:  # a pair's process: run it and exit as `python check.py ...` would
        main, argv = started
        exit_without_teardown(main(argv))
