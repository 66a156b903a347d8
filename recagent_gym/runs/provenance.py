"""Provenance of a results report: what made it, so that every published figure can be re-made by one command.

A command that measures a headline result (``users transfer``, ``evaluate agreement``, ``evaluate rl-comparison``,
``evaluate discrimination | preference | rating``, ``evaluate efficiency``) declares its report with
:func:`declare_report`; once the command has returned, :func:`recagent_gym.runs.cli.dispatch` calls
:func:`stamp_report`, which inserts :func:`provenance_header` below the report's title and, with ``--results-page
PATH``, copies the stamped report there (e.g. ``docs/results/transfer.md``). The header is built in this one place.

Nothing here fails a run: an unknown commit, CPU model or dirty-tree check reads ``unknown``. Secrets never reach
the header: every argument of the command line goes through the configuration's secret rules and the API-key
scrubber.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "<!-- provenance: written by recagent-gym; re-made by the command below -->"
"""First line of the header: a report that has one is not stamped twice."""


@dataclass(frozen=True)
class ReportFacts:
    """What a command measured with: the report it wrote and the facts that its header states."""

    report: Path
    dataset: str
    user_models: Sequence[str] = ()
    llm: str = ""
    seeds: Sequence[int] = ()
    users: int | str = ""
    extra: dict[str, str] = field(default_factory=dict)


def add_results_page_argument(parser: argparse.ArgumentParser) -> None:
    """``--results-page PATH``: also copy the stamped report to PATH (e.g. ``docs/results/transfer.md``)."""
    parser.add_argument(
        "--results-page",
        default=None,
        metavar="PATH",
        help="also copy the report, with its provenance header, to PATH (e.g. docs/results/NAME.md)",
    )


def declare_report(args: argparse.Namespace, facts: ReportFacts) -> None:
    """Tell the command line which report this command wrote; it is stamped once the command returns."""
    args.report_facts = facts


def llm_description(llm: object) -> str:
    """``backend model`` of an ``LLMConfig`` (``openai gpt-4o-mini at URL``); for the embedded model also what its
    figures depend on beyond the prompts: the decoding (``llm.decoding``) and the llama.cpp build
    (``embedded gemma-3-270m-q4_k_m (canonical decoding, llama-cpp-python 0.3.16)``)."""
    from recagent_gym.llm.config import EMBEDDED_MODEL

    backend = str(getattr(llm, "backend", "unknown"))
    model = getattr(llm, "model", None) or (EMBEDDED_MODEL if backend == "embedded" else "unknown")
    urls = list(getattr(llm, "base_urls", []) or []) or [u for u in [getattr(llm, "base_url", None)] if u]
    where = f" at {', '.join(urls)}" if backend != "embedded" and urls else ""
    if backend == "embedded":
        where = f" ({getattr(llm, 'decoding', 'batched')} decoding, llama-cpp-python {_version('llama-cpp-python')})"
    return f"{backend} {model}{where}"


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def llm_of(user_models: Sequence[str], llm: object) -> str:
    """:func:`llm_description` when one of ``user_models`` is an LLM agent (``llm``, ``llm+prior``, ...), else
    ``none``: a run of classical or distilled users names no language model it never called."""
    return llm_description(llm) if any(m.startswith("llm") for m in user_models) else "none (no LLM user model)"


RESULTS_DIR = "docs/results"
"""Where the results pages live in the checkout (their changes leave the commit clean)."""


def git_commit(where: Path | None = None) -> str:
    """The checkout's commit (``+ uncommitted changes`` when the tree differs), or ``unknown`` outside git.

    Changes under ``docs/results/`` do not count: those are the pages the commands write (outputs, not the code
    that made the figures), so a page written after another in the same checkout names a clean commit."""
    folder = str(where or Path(__file__).resolve().parent)
    try:
        head = _git(folder, "rev-parse", "HEAD")
        dirty = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", f":(top,exclude){RESULTS_DIR}")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not head:
        return "unknown"
    return f"{head} + uncommitted changes" if dirty else head


def shown_path(path: str | Path) -> str:
    """``path`` as a report shows it: a file shipped in the package relative to the checkout
    (``recagent_gym/users/prior_bundled.json``), so that a page names no folder of the machine that wrote it; any
    other file as given."""
    root = Path(__file__).resolve().parents[2]
    resolved = Path(path).resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root / "recagent_gym") else str(path)


def _git(folder: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=10, check=False)
    if done.returncode != 0:
        raise subprocess.SubprocessError(done.stderr.strip())
    return done.stdout.strip()


def machine() -> str:
    """``N cores, CPU model (instruction set); load average`` (the cores this process may use, the CPU's name where
    the system says it, the instruction set torch's CPU kernels use where the run loaded torch, and how busy the
    machine was: timings on a shared machine are read with it)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    try:
        model = cpu_name(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        model = ""
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    torch = sys.modules.get("torch")  # loaded by the run (never imported for this): the kernels it dispatched to
    if torch is not None:
        model += f" ({torch.backends.cpu.get_cpu_capability()})"
    try:
        load = "; load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min) at the end".format(*os.getloadavg())
    except (AttributeError, OSError):
        load = ""
    return f"{cores} cores, {model}{load}"


def cpu_name(cpuinfo: str) -> str:
    """The first CPU's name in ``/proc/cpuinfo`` text, with its family and model numbers where given: a virtual
    machine's name is often generic ("AMD EPYC" for two generations whose speed differs by half), the numbers are
    not. Empty if the text names no CPU."""
    first = cpuinfo.strip().split("\n\n")[0]  # one block per processor
    fields = {
        key.strip().lower(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())
    }
    name = fields.get("model name", "")
    if name and "cpu family" in fields and "model" in fields:
        name += f" family {fields['cpu family']} model {fields['model']}"
    return name


def command_line(argv: Sequence[str]) -> str:
    """``recagent-gym ARGS`` with every secret masked: a ``--set`` of a secret key, the value after an option whose
    name says it holds a secret (``--api-key VALUE``), and anything shaped like a provider key."""
    from recagent_gym.llm.secrets import redact
    from recagent_gym.runs.config.redact import MASK, redact_override, secret_paths
    from recagent_gym.runs.config.root import Config

    secrets = secret_paths(Config)
    words: list[str] = []
    mask_next = False
    for word in argv:
        if mask_next:
            words.append(MASK)
            mask_next = False
            continue
        option, eq, _ = word.partition("=")
        if word.startswith("--") and _secret_option(option.lstrip("-").replace("-", "_")):
            words.append(f"{option}={MASK}" if eq else word)
            mask_next = not eq
        elif "=" in word and not word.startswith("-"):
            words.append(redact_override(word, secrets))
        else:
            words.append(word)
    return redact(shlex.join(["recagent-gym", *words]))


_SECRET_OPTION_WORDS = ("api_key", "apikey", "secret", "password", "passwd")


def _secret_option(name: str) -> bool:
    """Whether an option's name says its value is a secret (``--api-key``, ``--hf-token``); not ``--keys`` (how
    many API keys an efficiency run uses) nor ``--max-tokens``."""
    name = name.lower()
    return any(word in name for word in _SECRET_OPTION_WORDS) or name.endswith(("_key", "token"))


def provenance_header(
    argv: Sequence[str],
    dataset: str,
    user_models: Sequence[str],
    llm: str,
    seeds: Sequence[int],
    users: int | str,
    wall_s: float,
    *,
    commit: str | None = None,
    now: dt.datetime | None = None,
    extra: dict[str, str] | None = None,
) -> str:
    """The Markdown block stating how a report was made (commit, full command line with secrets masked, data,
    user models and LLM, seeds, users, machine, wall time, date)."""
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        ("command", f"`{command_line(argv)}`"),
        ("commit", f"`{commit or git_commit()}`"),
        ("dataset", str(dataset)),
        ("user models", ", ".join(user_models) or "-"),
        ("LLM", llm or "-"),
        ("seeds", ", ".join(str(s) for s in seeds) or "-"),
        ("users", str(users) if users != "" else "-"),
        ("machine", machine()),
        ("wall time", f"{wall_s:.0f} s ({wall_s / 60:.1f} min)"),
        ("date", when),
        *(extra or {}).items(),
    ]
    body = "\n".join(f"| {name} | {value.replace('|', '/')} |" for name, value in rows)
    return f"{MARKER}\n\n| provenance | |\n|---|---|\n{body}\n"


def with_header(markdown: str, header: str) -> str:
    """``markdown`` with ``header`` below its title line (``# ...``), or on top when it has none; unchanged when it
    already has a provenance header."""
    if MARKER in markdown:
        return markdown
    lines = markdown.split("\n")
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", header, *lines[1:]])
    return header + "\n" + markdown


def stamp_report(args: argparse.Namespace, wall_s: float, *, commit: str | None = None) -> Path | None:
    """Insert the header into the report declared by the command (if any); copy it to ``--results-page``.

    ``commit`` is the checkout's commit when the command started (read now when None). Returns the results page
    written, if any."""
    facts: ReportFacts | None = getattr(args, "report_facts", None)
    if facts is None or not facts.report.is_file():
        return None
    argv = getattr(args, "argv", None) or []
    header = provenance_header(
        argv,
        facts.dataset,
        facts.user_models,
        facts.llm,
        facts.seeds,
        facts.users,
        wall_s,
        commit=commit,
        extra=facts.extra,
    )
    facts.report.write_text(with_header(facts.report.read_text(encoding="utf-8"), header), encoding="utf-8")
    page = getattr(args, "results_page", None)
    if not page:
        return None
    target = Path(page)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = facts.report.read_text(encoding="utf-8")
    for name in dict.fromkeys(IMAGE_LINK.findall(text)):  # the report's plots beside it go beside the page
        source = facts.report.parent / name
        if ".." not in Path(name).parts and not Path(name).is_absolute() and source.is_file():
            copied = f"{target.stem}-{name.replace('/', '-')}"
            _replace_file(target.with_name(copied), source.read_bytes())
            text = text.replace(f"]({name})", f"]({copied})")
    _replace_file(target, text.encode("utf-8"))
    return target


IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
"""A Markdown image with a relative PNG target: ``![plot](plot.png)``."""


def _replace_file(target: Path, data: bytes) -> None:
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, target)  # whole or not at all: other commands may write pages beside it
