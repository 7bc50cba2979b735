"""Names another user took: in a shared directory (/dev/shm is everyone's, sticky), user nobody
plants a FIFO, a device, a directory or a socket at a bot's name, at a forked worker's name, or
where the parent's file was. The bot never waits on it (an open for reading alone would wait on a
FIFO for a writer): attach fails at once naming the file, what it is and its owner; a worker takes
a fresh name or writes nothing, and says why. Every producer runs in a child with a deadline, and
its forked children end by SIGALRM rather than wait: a hang fails the test."""

import os
import re
import socket
import stat
import subprocess
import sys

import pytest

from conftest import BotFile, bot_files, missing, run_python
from test_process import backend_expression

NOBODY = 65534
KINDS = {"fifo": "a FIFO (named pipe)", "device": "a character device", "directory": "a directory", "socket": "a socket"}


@pytest.fixture
def shared_dir(ring_dir):
    """The test's ring directory, shared as /dev/shm is (sticky, everyone may create); root only."""
    if os.geteuid() != 0:
        missing("planting files as user nobody needs root")
    os.chmod(ring_dir, 0o1777)
    return ring_dir


def plant_as_nobody(kind, path):
    """Makes `kind` at `path`, owned by nobody: a FIFO, a directory and a socket by nobody itself;
    a device (1:3, what /dev/null is) by root, given to nobody (only root may make one)."""
    if kind == "device":
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        os.lchown(path, NOBODY, NOBODY)
        return
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "directory":
                os.mkdir(path)
            else:
                socket.socket(socket.AF_UNIX).bind(path)
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(child, 0)[1] == 0, f"planting {kind} at {path} as nobody failed"


def still_planted(kind, path):
    """Whether what is at `path` is still nobody's `kind`: untouched by the bot refused."""
    info = os.lstat(path)
    test = {"fifo": stat.S_ISFIFO, "device": stat.S_ISCHR, "directory": stat.S_ISDIR, "socket": stat.S_ISSOCK}[kind]
    return info.st_uid == NOBODY and test(info.st_mode)


def refusal(kind, path):
    return (f"{path} is {KINDS[kind]} owned by uid {NOBODY}, not a regular file of uid {os.geteuid()}; a bot opens "
            "only regular files of its own user (have it removed, or attach another name)")


ATTACH = """
import ringside
try:
    ringside.Bot("taken", {directory!r}, _backend={backend})
except ringside.RingError as error:
    print(error)
else:
    print("attached")
"""


@pytest.mark.parametrize("kind", KINDS)
def test_nobodys_file_at_the_bots_name_is_refused_at_attach_naming_it_and_its_owner(backend, shared_dir, kind):
    path = os.path.join(shared_dir, "ringside.taken")
    plant_as_nobody(kind, path)
    result = run_python(ATTACH.format(backend=backend_expression(backend), directory=shared_dir), timeout=20)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"bot taken: {refusal(kind, path)}\n"
    assert still_planted(kind, path)
    assert bot_files(shared_dir, "taken") == ["ringside.taken"]


WORKER = """
import ringside
bot = ringside.Bot("pooled", {directory!r}, _backend={backend}, worker=True)
bot.counter("worker_total").inc(5)
print(bot.path, flush=True)
bot.close()
"""


def test_a_worker_of_a_bot_whose_name_holds_nobodys_fifo_registers_and_writes(backend, shared_dir):
    """Registering reads the bot's own file for the operator's switches (CONTROL in ringside.h): a
    FIFO there is refused by its type, never waited on."""
    fifo = os.path.join(shared_dir, "ringside.pooled")
    plant_as_nobody("fifo", fifo)
    result = run_python(WORKER.format(backend=backend_expression(backend), directory=shared_dir), timeout=20)
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert os.path.dirname(path) == shared_dir and re.fullmatch(r"ringside\.pooled@[0-9]+", os.path.basename(path)), path
    assert BotFile(path).counter("worker_total") == 5
    assert still_planted("fifo", fifo)


FORKED = """
import os, signal, sys, ringside
bot = ringside.Bot("pb", {directory!r}, _backend={backend}, lane_capacity=16)
increments = bot.counter("planted_increments")
increments.inc()
go_r, go_w = os.pipe()
child = os.fork()
if child == 0:
    signal.alarm(10)  # a child that waits dies by SIGALRM, and the test fails
    os.read(go_r, 1)
    increments.inc()  # the first call: the child becomes a worker of the bot now
    if not bot.enabled:
        os._exit(3)
    print("worker", bot.path, flush=True)
    bot.close()
    os._exit(0)
if {remove_parents_file}:
    os.unlink(bot.path)
print("child", child, flush=True)
sys.stdin.readline()
os.write(go_w, b"!")
status = os.waitpid(child, 0)[1]
print("child", child, "exit" if os.WIFEXITED(status) else "signal",
      os.WEXITSTATUS(status) if os.WIFEXITED(status) else os.WTERMSIG(status), flush=True)
bot.close()
"""


def run_forked(backend, directory, remove_parents_file, plant):
    """Runs FORKED: once the child is forked (and waits), plant(child_pid); then lets it go.
    Returns the child's pid, the lines printed after its own, and stderr."""
    script = FORKED.format(backend=backend_expression(backend), directory=directory, remove_parents_file=remove_parents_file)
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()
        assert first.startswith("child "), (first, process.stderr.read())
        child = int(first.split()[1])
        plant(child)
        output, errors = process.communicate("go\n", timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, errors
    return child, output.splitlines(), errors


@pytest.mark.parametrize("kind", KINDS)
def test_nobodys_file_at_a_forked_workers_own_name_sends_it_to_a_fresh_name(backend, shared_dir, kind):
    child, lines, errors = run_forked(backend, shared_dir, False,
                                      lambda pid: plant_as_nobody(kind, os.path.join(shared_dir, f"ringside.pb@{pid}")))
    assert lines[-1] == f"child {child} exit 0", (lines, errors)
    worker = lines[0].removeprefix("worker ")
    name = os.path.basename(worker)
    assert name.startswith(f"ringside.pb@{child}.") and name.rsplit(".", 1)[1].isdigit(), worker
    info = os.lstat(worker)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
    assert BotFile(worker).counter("planted_increments") == 1
    assert still_planted(kind, os.path.join(shared_dir, f"ringside.pb@{child}"))


@pytest.mark.parametrize("kind", KINDS)
def test_nobodys_file_where_the_parents_file_was_leaves_the_child_writing_nothing_never_waiting(backend, shared_dir, kind):
    """The child's first call reads the registry of the file the parent attached, at its path: what
    is there now is another file, and the child writes nothing, says why once, and goes on."""
    path = os.path.join(shared_dir, "ringside.pb")
    child, lines, errors = run_forked(backend, shared_dir, True, lambda pid: plant_as_nobody(kind, path))
    assert lines == [f"child {child} exit 3"], (lines, errors)
    assert (f"ringside: bot pb: this forked child (pid {child}) writes nothing: {path} is no longer the file the "
            f"parent attached: its registry is gone (it is now {KINDS[kind]} owned by uid {NOBODY})\n") in errors
    assert bot_files(shared_dir, "pb") == ["ringside.pb"] and still_planted(kind, path)
