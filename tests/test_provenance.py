"""The provenance header of results reports: what it states, what it hides, and how the command line stamps it."""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
from pathlib import Path

import pytest

from recagent_gym.runs import cli
from recagent_gym.runs.provenance import (
    MARKER,
    ReportFacts,
    command_line,
    declare_report,
    git_commit,
    provenance_header,
    stamp_report,
    with_header,
)

NOW = dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC)


def _header(argv: list[str], **kw: object) -> str:
    args = dict(dataset="bundled", user_models=["distilled", "llm"], llm="embedded gemma", seeds=[0, 1], users=40)
    args.update(kw)
    return provenance_header(argv, wall_s=754.2, commit="abc123", now=NOW, **args)  # type: ignore[arg-type]


def test_header_states_commit_command_data_users_machine_and_wall_time() -> None:
    text = _header(["users", "transfer", "--config", "quickstart"])
    assert text.startswith(MARKER)
    assert "| command | `recagent-gym users transfer --config quickstart` |" in text
    assert "| commit | `abc123` |" in text
    assert "| wall time | 754 s (12.6 min) |" in text
    assert "| dataset | bundled |" in text
    assert "| user models | distilled, llm |" in text
    assert "| seeds | 0, 1 |" in text
    assert "| users | 40 |" in text
    assert "| date | 2026-01-02 03:04 UTC |" in text
    assert " cores, " in text


FAKE_KEY = "sk-" + "abcdefghijklmnop1234"
"""Shaped like a provider key; built at run time so that no key-shaped string is tracked."""


@pytest.mark.parametrize(
    ("argv", "secret"),
    [
        (["llm", "check", "--set", "llm.api_keys=[sk-live-0123456789abcdef]"], "sk-live-0123456789abcdef"),
        (["x", "--set", "llm.api_key=hunter2hunter2"], "hunter2hunter2"),
        (["x", "--api-key", "plainsecretvalue"], "plainsecretvalue"),
        (["x", "--api-key=plainsecretvalue"], "plainsecretvalue"),
        (["x", "--hf-token", "plainsecretvalue"], "plainsecretvalue"),
        (["x", "--note", FAKE_KEY], FAKE_KEY),
    ],
)
def test_a_key_on_the_command_line_is_redacted(argv: list[str], secret: str) -> None:
    line = command_line(argv)
    assert secret not in line
    assert "***" in line
    assert secret not in _header(argv)


def test_ordinary_overrides_and_options_are_kept() -> None:
    assert command_line(["x", "--set", "llm.max_tokens=32", "--set", "llm.api_key_env=MY_VAR"]) == (
        "recagent-gym x --set llm.max_tokens=32 --set llm.api_key_env=MY_VAR"
    )
    argv = ["evaluate", "efficiency", "--keys", "1,5", "--max-tokens", "32", "--agents", "1,10"]
    assert command_line(argv) == "recagent-gym " + " ".join(argv)


def test_commit_is_unknown_outside_git(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == "unknown"


def test_commit_of_a_checkout_and_its_dirty_tree(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "f.txt").write_text("a")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "m")
    head = git("rev-parse", "HEAD").strip()
    assert git_commit(tmp_path) == head
    page = tmp_path / "docs" / "results" / "page.md"
    page.parent.mkdir(parents=True)
    page.write_text("a")
    git("add", "docs")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "page")
    head = git("rev-parse", "HEAD").strip()
    page.write_text("b")  # a results page written by a command: an output, the commit stays clean
    assert git_commit(tmp_path) == head
    (tmp_path / "f.txt").write_text("b")
    assert git_commit(tmp_path) == f"{head} + uncommitted changes"


def test_header_goes_below_the_title_once() -> None:
    header = _header(["a"])
    once = with_header("# Title\n\nbody\n", header)
    assert once.startswith("# Title\n\n" + MARKER)
    assert once.endswith("body\n")
    assert with_header(once, header) == once
    assert with_header("no title\n", header).startswith(MARKER)


def test_dispatch_stamps_the_declared_report_and_copies_the_results_page(tmp_path: Path) -> None:
    report = tmp_path / "run" / "table.md"
    page = tmp_path / "docs" / "results" / "table.md"

    def command(args: argparse.Namespace) -> int:
        report.parent.mkdir()
        report.write_text("# Result\n\n| a | b |\n", encoding="utf-8")
        declare_report(args, ReportFacts(report, "bundled", ["llm"], "embedded m", [3], 8))
        return 0

    argv = ["evaluate", "x", "--set", "llm.api_keys=[sk-live-0123456789abcdef]"]
    args = argparse.Namespace(func=command, verbose=False, results_page=str(page), argv=argv)
    assert cli.dispatch(args) == 0
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Result\n\n" + MARKER)
    assert "| seeds | 3 |" in text
    assert "| wall time |" in text
    assert "sk-live" not in text
    assert page.read_text(encoding="utf-8") == text


def test_the_reports_plots_go_beside_the_results_page(tmp_path: Path) -> None:
    report = tmp_path / "run" / "sim.md"
    page = tmp_path / "docs" / "results" / "page.md"

    def command(args: argparse.Namespace) -> int:
        report.parent.mkdir()
        (report.parent / "plot.png").write_bytes(b"\x89PNG fake")
        (report.parent / "seed_3").mkdir()
        (report.parent / "seed_3" / "curve.png").write_bytes(b"\x89PNG curve")
        (tmp_path / "outside.png").write_bytes(b"\x89PNG outside")
        report.write_text("# R\n\n![the plot](plot.png)\n![gone](missing.png)\n![c](seed_3/curve.png)\n"
                          "![o](../outside.png)\n", encoding="utf-8")  # fmt: skip
        declare_report(args, ReportFacts(report, "bundled"))
        return 0

    args = argparse.Namespace(func=command, verbose=False, results_page=str(page), argv=[])
    assert cli.dispatch(args) == 0
    assert (page.parent / "page-plot.png").read_bytes() == b"\x89PNG fake"
    text = page.read_text(encoding="utf-8")
    assert "![the plot](page-plot.png)" in text and "![gone](missing.png)" in text
    assert "![c](page-seed_3-curve.png)" in text and (page.parent / "page-seed_3-curve.png").is_file()
    assert "![o](../outside.png)" in text and not list(page.parent.glob("*outside*"))  # never from outside the run
    assert "](plot.png)" in report.read_text(encoding="utf-8")  # the run folder's report keeps its own links


def test_a_failed_command_is_not_stamped(tmp_path: Path) -> None:
    report = tmp_path / "table.md"
    report.write_text("# R\n", encoding="utf-8")

    def command(args: argparse.Namespace) -> int:
        declare_report(args, ReportFacts(report, "bundled"))
        return 1

    assert cli.dispatch(argparse.Namespace(func=command, verbose=False, argv=[])) == 1
    assert report.read_text(encoding="utf-8") == "# R\n"
    assert stamp_report(argparse.Namespace(), 1.0) is None


def test_results_page_that_is_a_folder_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(func=lambda a: 0, verbose=False, results_page=str(tmp_path), argv=[])
    assert cli.dispatch(args) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--results-page" in err


def test_every_results_command_offers_results_page() -> None:
    parser = cli.build_parser()
    commands = [
        ["users", "transfer"],
        ["evaluate", "agreement"],
        ["evaluate", "rl-comparison"],
        ["evaluate", "discrimination"],
        ["evaluate", "preference"],
        ["evaluate", "rating"],
        ["evaluate", "efficiency"],
    ]
    for words in commands:
        args = parser.parse_args([*words, "--results-page", "docs/results/x.md"])
        assert args.results_page == "docs/results/x.md", words


def test_the_llm_is_named_only_when_a_user_model_called_it() -> None:
    from recagent_gym.llm.config import LLMConfig
    from recagent_gym.runs.provenance import llm_of

    served = LLMConfig(backend="openai", model="m", base_url="http://127.0.0.1:8000/v1")
    assert llm_of(["distilled", "llm+prior"], served) == "openai m at http://127.0.0.1:8000/v1"
    embedded = llm_of(["llm"], LLMConfig())
    assert embedded.startswith("embedded gemma-3-270m-q4_k_m (canonical decoding, llama-cpp-python ")
    assert "(batched decoding" in llm_of(["llm"], LLMConfig(decoding="batched"))
    assert llm_of(["recsim", "embedding", "distilled"], LLMConfig()).startswith("none")


def test_machine_names_the_instruction_set_of_a_run_that_loaded_torch() -> None:
    import torch

    from recagent_gym.runs.provenance import machine

    assert f"({torch.backends.cpu.get_cpu_capability()})" in machine()


def test_cpu_name_adds_family_and_model_a_generic_name_hides() -> None:
    from recagent_gym.runs.provenance import cpu_name

    block = "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: {f}\nmodel\t\t: {m}\nmodel name\t: AMD EPYC\n"
    two = block.format(n=0, f=25, m=17) + "\n" + block.format(n=1, f=26, m=2)
    assert cpu_name(two) == "AMD EPYC family 25 model 17"  # the first processor's, not a mix of both blocks
    assert cpu_name("model name\t: Some CPU\n") == "Some CPU"  # no numbers given: the name alone
    assert cpu_name("processor\t: 0\n") == ""
