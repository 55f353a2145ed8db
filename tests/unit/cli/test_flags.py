"""The flags every gateway command shares: --address and --namespace before or after the
subcommand's name, and JSON values inline, from @file or from stdin."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from perdure.cli import keys_cmd, workers_cmd, workflow_cmd
from perdure.cli.flags import UsageError, json_argument
from perdure.cli.flow_flags import flow_options
from perdure.worker._flow import Budget


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    groups = parser.add_subparsers(dest="group")
    for command in (workflow_cmd, keys_cmd, workers_cmd):
        command.add_parser(groups)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ("workflow", "--address", "h:1", "--namespace", "acme", "list"),
        ("workflow", "list", "--address", "h:1", "--namespace", "acme"),
        ("workflow", "--address", "h:1", "watch", "x", "--namespace", "acme"),
        ("keys", "--address", "h:1", "list", "--namespace", "acme"),
        ("workers", "--namespace", "acme", "policy", "t", "pinned", "--address", "h:1"),
    ],
)
def test_address_and_namespace_stand_before_or_after_the_subcommand(argv: tuple[str]) -> None:
    args = parse(*argv)
    assert (args.address, args.namespace) == ("h:1", "acme")


def test_a_json_flag_is_inline_a_file_or_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "input.json").write_text('{"n": 18446744073709551617}\n')
    from_file = json_argument("--input", f"@{tmp_path / 'input.json'}")
    assert from_file.data == b'{"n": 18446744073709551617}'  # exactly as written
    monkeypatch.setattr("sys.stdin", io.StringIO("[1, 2.50]"))
    assert json_argument("--input", "-").data == b"[1, 2.50]"
    assert json_argument("--input", "null").data == b"null"
    with pytest.raises(UsageError, match="cannot read"):
        json_argument("--input", f"@{tmp_path / 'missing.json'}")
    with pytest.raises(UsageError, match="--input is not valid JSON"):
        json_argument("--input", "{not json")


def test_start_takes_flow_control_flags() -> None:
    args = parse(
        "workflow", "start", "agent", "--key", "tenant:acme", "--key", "tier:gold",
        "--priority", "2", "--fairness-key", "tenant:acme", "--budget-units", "9223372036854775807",
        "--on-budget-exceeded", "fail",
    )  # fmt: skip
    assert flow_options(args) == {
        "keys": ["tenant:acme", "tier:gold"],
        "priority": 2,
        "fairness_key": "tenant:acme",
        "budget": Budget(units=2**63 - 1),
        "on_budget_exceeded": "fail",
    }
    plain = flow_options(parse("workflow", "start", "agent"))
    assert plain == {
        "keys": [],
        "priority": None,
        "fairness_key": None,
        "budget": None,
        "on_budget_exceeded": None,
    }


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--priority", "9"), "priority must be 1"),
        (("--budget-cost-micros", "-1"), "budget cost_micros must be >= 0"),
        (("--key", "a", "--key", "a"), "must not repeat"),
    ],
)
def test_bad_flow_control_flags_are_usage_errors(flags: tuple[str, ...], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        flow_options(parse("workflow", "start", "agent", *flags))
