"""Issue 54, a fuzz test over every command's options: hypothesis draws a command from the parser tree, values for
its options (hostile numbers, paths and text, by each option's type) and ``--set`` overrides of the configuration's
keys (by each key's type), and runs the real command line in-process. Each example must end with exit status 0 or 2
(argparse's usage errors included) and no traceback, and must write nothing outside its output folder.

Bounded in time: the language model is the scripted one and the sentence embedder the hashing one (no model load);
an example that passes every check and starts real work is stopped after :data:`EXAMPLE_BUDGET_S` (it was
accepted: what runs after its checks is other tests' business), and examples stop after :data:`TOTAL_BUDGET_S`.
Left out: ``serve`` (a server that blocks), ``data download`` (the network), ``evaluate efficiency`` (a local HTTP
server) and ``--human`` (reads the terminal)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import itertools
import os
import pkgutil
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import recagent_gym
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.runs.cli import build_parser, main
from recagent_gym.runs.config.root import Config
from tests._sim_fixtures import main as sim_main
from tests._sim_fixtures import settings as sim_settings

EXAMPLE_BUDGET_S = 2.0
TOTAL_BUDGET_S = float(os.environ.get("RECAGENT_FUZZ_SECONDS", "25"))
EXAMPLES = int(os.environ.get("RECAGENT_FUZZ_EXAMPLES", "200"))
RANDOM = os.environ.get("RECAGENT_FUZZ_RANDOM") == "1"
"""CI draws the same examples every run; ``RECAGENT_FUZZ_RANDOM=1`` (with more examples and seconds) hunts."""
LEFT_OUT = {("serve",), ("data", "download"), ("evaluate", "efficiency")}
LEFT_OUT_OPTIONS = {"--human", "--help", "-h", "--results-page"}
"""``--results-page PATH`` writes the page where it is told, the working folder included (its checks:
``tests/test_hardening_round3_lock.py``)."""


class Budget(BaseException):
    """An example that outlived its budget: it passed the checks and was doing real work."""


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None:
        yield path, parser
        return
    for name, child in sub.choices.items():
        yield from leaves(child, (*path, name))


COMMANDS = [(path, p) for path, p in leaves(build_parser()) if path not in LEFT_OUT]

TEXT = ["", "x", "-1", "0", "7", "1e9", "nan", "a=b", "../..", "ünïcødé", "x" * 300, "0,0", "1,2", ",", "[]",
        "random,popularity", "bogus", "#3", "0" * 5000, "\x00"]  # fmt: skip
INTS = st.one_of(st.integers(-3, 50), st.sampled_from([-(2**63), -1, 2**31, 2**32, 2**63, 10**30])).map(str)
FLOATS = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "0.5", "1e999", "x", "1"])
YAML = ["-1", "0", "1", "2", "4294967296", "-4294967296", "0x10", "1.5", ".nan", ".inf", "true", "''", "[]",
        "[bogus]", "[random, popularity]", "{}", "{a: 1}", "null", "bogus", "x" * 200, "[1, 2]", "'-1'"]  # fmt: skip


def config_keys() -> list[tuple[str, Any]]:
    return [(f"{section}.{name}", field.annotation) for section, model in Config.model_fields.items()
            for name, field in model.annotation.model_fields.items()]  # fmt: skip


KEYS = config_keys()
PATHISH = ("dir", "path", "file", "weights", "fitted", "url")


def value_for(key: str, annotation: Any, paths: list[str]) -> st.SearchStrategy[str]:
    """Values for one configuration key, drawn by its type (and always some of every type)."""
    typed: list[st.SearchStrategy[str]] = [st.sampled_from(YAML)]
    args = [a for a in get_args(annotation) if a is not type(None)]
    base = args[0] if get_origin(annotation) is not Literal and len(args) == 1 else annotation
    if get_origin(base) is Literal:
        typed.append(st.sampled_from([str(a) for a in get_args(base)]))
    elif base is int:
        typed.append(INTS)
    elif base is float:
        typed.append(FLOATS)
    elif base is bool:
        typed.append(st.sampled_from(["true", "false"]))
    if any(word in key.rsplit(".", 1)[-1] for word in PATHISH):
        return st.sampled_from(paths)  # never a path outside the test's folders
    return st.one_of(*typed)


def option_values(action: argparse.Action, out: list[str], inputs: list[str]) -> st.SearchStrategy[list[str]]:
    dest = action.dest
    if dest in ("out", "output_dir", "dir"):
        one = st.sampled_from(out)
    elif dest in ("policy", "logs", "model", "resume", "checkpoint", "dataset", "config"):
        one = st.sampled_from(inputs)
    elif action.choices is not None:  # mostly valid values, so that examples get past the parser
        valid = st.sampled_from([str(c) for c in action.choices])
        one = st.one_of(valid, valid, st.sampled_from(TEXT))
    elif action.type is int:
        one = st.one_of(st.integers(0, 3).map(str), INTS, st.sampled_from(TEXT))
    elif action.type is float:
        one = FLOATS
    else:
        one = st.sampled_from(TEXT)
    if isinstance(action.nargs, int):
        return st.lists(one, min_size=action.nargs, max_size=action.nargs)
    return st.lists(one, min_size=1, max_size=1)


@st.composite
def command_lines(draw: Any, out: Path, inputs: Path) -> list[str]:
    path, parser = draw(st.sampled_from(COMMANDS))
    outs = [str(out), str(out / "deep" / "er"), str(inputs / "notes.txt"), "/proc/nope", ""]
    ins = [str(inputs / n) for n in ("garbage.zip", "missing", "folder", "notes.txt", "bad.yaml")]
    ins += ["p=" + str(inputs / "garbage.zip"), "/proc/nope", "", "bundled", "quickstart", "simulate_small"]
    ins += [str(out / "run")] * 3  # a paused run of its own (resume, intervene, interview get past the file)
    argv = list(path)
    for action in parser._actions:
        if set(action.option_strings) & LEFT_OUT_OPTIONS or isinstance(action, argparse._HelpAction):
            continue
        if action.dest == "overrides":
            pairs = draw(st.lists(st.sampled_from(KEYS), max_size=3))
            for key, annotation in pairs:
                argv += ["--set", f"{key}={draw(value_for(key, annotation, outs))}"]
            if any(a.dest == "overrides" for a in parser._actions):
                argv += ["--set", f"train.output_dir={out / 'train'}"]  # the default would be the working folder
            continue
        if not action.option_strings:  # a positional
            argv += draw(option_values(action, outs, ins))
            continue
        if not action.required and not draw(st.booleans()):
            continue
        flag = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction | argparse._VersionAction):
            argv.append(flag)
        else:
            times = 1 if not isinstance(action, argparse._AppendAction) else draw(st.integers(1, 2))
            for _ in range(times):
                argv += [flag, *draw(option_values(action, outs, ins))]
    if "--out" not in argv and _has(parser, "out"):
        argv += ["--out", str(out)]  # a default --out (simulate's outputs/simulation, ...) is in the working folder
    return argv


def _has(parser: Any, dest: str) -> bool:
    return any(a.dest == dest for a in parser._actions)


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and skip not in p.parents}  # fmt: skip


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Raise :class:`Budget` in the main thread after ``seconds``, and again every 50 ms until it gets out: a raise
    that lands in a ``__del__`` or a callback is swallowed there, and never inside an import (a module stopped
    half-way stays broken for the examples after it)."""
    armed = [True]

    def stop(signum: int, frame: Any) -> None:
        if not armed[0]:
            return
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        while frame is not None:
            if frame.f_code.co_filename.startswith("<frozen importlib"):
                return
            frame = frame.f_back
        raise Budget

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def preload() -> None:
    """Import every module first: an import stopped half-way by the budget could break the examples after it."""
    for module in pkgutil.walk_packages(recagent_gym.__path__, "recagent_gym."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a Budget swallowed by a gc hook
def test_every_command_ends_in_exit_0_or_2_without_traceback_or_stray_files(tmp_path, monkeypatch):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("the time budget needs SIGALRM, which only the main thread can handle")
    preload()
    monkeypatch.setattr("recagent_gym.llm.embedder.SentenceEmbedder", lambda *a, **k: HashingEmbedder(32))
    monkeypatch.setattr("recagent_gym.llm.embedded.EmbeddedLLM", lambda *a, **k: ScriptedLLM(default=lambda p: "ok"))
    inputs, work, outs = tmp_path / "inputs", tmp_path / "work", tmp_path / "out"
    for folder in (inputs / "folder", work, outs):
        folder.mkdir(parents=True)
    (inputs / "garbage.zip").write_bytes(bytes(range(256)) * 8)
    (inputs / "notes.txt").write_text("not a folder")
    (inputs / "bad.yaml").write_text("train: [unclosed\n  - : :")
    sets = [a for s in sim_settings("simulation.rounds=2") for a in ("--set", s)]
    assert sim_main(["simulate", *sets, "--out", str(inputs / "run"), "--rounds", "1"]) == 0
    monkeypatch.chdir(work)
    start, seen, failures = time.monotonic(), {"0": 0, "2": 0, "budget": 0}, []
    by_command: dict[str, list[str]] = {}
    counter = itertools.count()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not RANDOM, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def one(data: Any) -> None:
        out = outs / str(next(counter))
        argv = data.draw(command_lines(out, inputs))  # drawn even when out of time: hypothesis wants the same draws
        if time.monotonic() - start > TOTAL_BUDGET_S:
            return
        shutil.copytree(inputs / "run", out / "run")
        before = snapshot(tmp_path, outs)
        codes = dict(seen)
        failure = run_one(argv, work, seen)
        ended = next((k for k in seen if seen[k] != codes.get(k)), "?")
        by_command.setdefault(" ".join(a for a in argv[:2] if not a.startswith("-")), []).append(ended)
        if failure is None and snapshot(tmp_path, outs) != before:
            failure = "wrote outside its output folder"
        if failure is not None:
            failures.append(f"{argv}: {failure}")

    one()
    print(f"fuzz: {seen} in {time.monotonic() - start:.0f} s; by command: {by_command}")
    assert not failures, "\n\n".join(failures)
    assert seen["2"] >= 5 and sum(seen.values()) >= 10, seen


def run_one(argv: list[str], work: Path, seen: dict[str, int]) -> str | None:
    """Run one command line; what went wrong, or None."""
    err = io.StringIO()
    began = time.monotonic()
    try:
        with contextlib.redirect_stderr(err), budget(EXAMPLE_BUDGET_S):
            code: Any = main(argv)
    except SystemExit as exc:  # argparse: a usage error is status 2
        code = exc.code if isinstance(exc.code, int) else 2
    except Budget:
        code = "budget"
    except Exception:  # the point of the test: a traceback
        return "raised:\n" + traceback.format_exc()[-3000:]
    seen[str(code)] = seen.get(str(code), 0) + 1
    took = time.monotonic() - began
    if took > EXAMPLE_BUDGET_S + 15:
        return f"ran {took:.0f} s past its budget of {EXAMPLE_BUDGET_S} s"
    if str(code) not in ("0", "2", "budget"):
        return f"exit {code}\n{err.getvalue()[-3000:]}"
    if "Traceback" in err.getvalue():
        return f"traceback\n{err.getvalue()[-3000:]}"
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    if str(code) == "2" and not (lines and lines[-1].startswith("recagent-gym")):  # ours, or argparse's usage error
        return f"exit 2 without its error line\n{err.getvalue()[-3000:]}"
    if list(work.iterdir()):
        return f"wrote into the working folder: {list(work.iterdir())}"
    return None
