"""PR comments -> commands: each form, what does not count, and bad arguments."""

from __future__ import annotations

import pytest

from sluice.bot.events.commands import (
    HELP,
    USAGE,
    WHERE_LIMIT,
    Command,
    CommandError,
    parse_command,
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/sluice plan", Command("plan")),
        ("/sluice deploy", Command("deploy")),
        ("/sluice help", Command("help")),
        ("   /sluice plan   ", Command("plan")),
        ("/sluice\tdeploy", Command("deploy")),
        ("/sluice PLAN", Command("plan")),
        ("/Sluice plan", Command("plan")),
        ("/sluice diff sales.orders", Command("diff", model="sales.orders")),
        ("/sluice diff Sales.Orders", Command("diff", model="sales.orders")),
        ("/sluice diff '_raw.t_1'", Command("diff", model="_raw.t_1")),
    ],
)
def test_each_form(body: str, expected: Command) -> None:
    assert parse_command(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        "LGTM, thanks!",
        "please run sluice plan",
        "I ran /sluice plan yesterday",  # not at the start of a line
        "/sluiceplan",
        "/sluiced",
        "`/sluice plan`",  # inline code
        "\t/sluice deploy",  # a tab (or four spaces) first: indented code
        "    /sluice deploy",
    ],
)
def test_not_a_command(body: str) -> None:
    assert parse_command(body) is None


def test_bare_prefix_asks_for_help() -> None:
    assert parse_command("/sluice") == Command("help", unknown="")
    assert parse_command("  /sluice  \nthanks") == Command("help", unknown="")


def test_unknown_subcommand_gets_help_naming_it() -> None:
    assert parse_command("/sluice apply now") == Command("help", unknown="apply")
    assert parse_command("/sluice Destroy") == Command("help", unknown="Destroy")


def test_multi_line_comment_first_command_line_counts() -> None:
    body = "Looks good to me.\n\n/sluice diff sales.orders\n/sluice deploy\n"
    assert parse_command(body) == Command("diff", model="sales.orders")


def test_windows_line_endings() -> None:
    assert parse_command("hello\r\n/sluice deploy\r\n") == Command("deploy")


def test_first_command_line_counts_even_when_unknown() -> None:
    assert parse_command("/sluice nope\n/sluice plan") == Command("help", unknown="nope")


def test_fenced_code_blocks_do_not_count() -> None:
    body = "To re-plan, write:\n```\n/sluice plan\n```\n"
    assert parse_command(body) is None
    tilde = "~~~text\n/sluice deploy\n~~~\n/sluice plan"
    assert parse_command(tilde) == Command("plan")
    longer = "````md\n```\n/sluice deploy\n```\n````\n/sluice help"
    assert parse_command(longer) == Command("help")


def test_unclosed_fence_hides_the_rest() -> None:
    assert parse_command("```\n/sluice deploy") is None


def test_quoted_lines_do_not_count() -> None:
    assert parse_command("> /sluice plan\n\nwhy did you run that?") is None
    assert parse_command(">> /sluice deploy") is None
    assert parse_command("> /sluice deploy\n\n/sluice plan") == Command("plan")
    # Without a blank line, the next line still belongs to the quote (CommonMark's lazy
    # continuation): it is shown quoted.
    assert parse_command("> /sluice deploy\n/sluice plan") is None


def test_html_comments_do_not_count() -> None:
    assert parse_command("<!-- /sluice deploy -->") is None
    body = "<!--\nPR template:\n/sluice deploy\n-->\n/sluice plan"
    assert parse_command(body) == Command("plan")


@pytest.mark.parametrize("name", ["plan", "deploy", "help"])
def test_plain_commands_take_no_arguments(name: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(f"/sluice {name} please")
    assert info.value.message == USAGE[name]
    assert "takes no arguments" in str(info.value.hint)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("/sluice diff sales.orders --where amount > 100", "amount > 100"),
        (
            "/sluice diff sales.orders --where order_date >= '2024-01-01' and region = 'EU'",
            "order_date >= '2024-01-01' and region = 'EU'",
        ),
        ("/sluice diff sales.orders --where \"status = 'open'\"", "status = 'open'"),
        ("/sluice diff sales.orders --where 'id < 10'", "id < 10"),
        ("/sluice diff sales.orders --where 'a' = 'b'", "'a' = 'b'"),
        ("/sluice diff sales.orders --where=id in (1, 2)", "id in (1, 2)"),
        ("/sluice diff sales.orders  --where   x is null  ", "x is null"),
        ('/sluice diff sales.orders --where note = "a -- b"', 'note = "a -- b"'),
    ],
)
def test_diff_where_keeps_the_rest_of_the_line(body: str, where: str) -> None:
    assert parse_command(body) == Command("diff", model="sales.orders", where=where)


def test_diff_where_is_one_line_only() -> None:
    body = "/sluice diff sales.orders --where id = 1\nand thanks!"
    assert parse_command(body) == Command("diff", model="sales.orders", where="id = 1")


def test_diff_where_at_the_limit_is_accepted_and_longer_refused() -> None:
    condition = "x = '" + "a" * (WHERE_LIMIT - 6) + "'"
    assert len(condition) == WHERE_LIMIT
    command = parse_command(f"/sluice diff s.t --where {condition}")
    assert command is not None
    assert command.where == condition
    too_long = "x = '" + "a" * WHERE_LIMIT + "'"
    with pytest.raises(CommandError) as info:
        parse_command(f"/sluice diff s.t --where {too_long}")
    assert info.value.message == USAGE["diff"]
    assert str(WHERE_LIMIT) in str(info.value.hint)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("/sluice diff", "name the model"),
        ("/sluice diff --where id = 1", "name the model"),
        ("/sluice diff orders", "not a model name"),
        ("/sluice diff a.b.c", "not a model name"),
        ("/sluice diff 1sales.orders", "not a model name"),
        ("/sluice diff sales.or-ders", "not a model name"),
        ("/sluice diff sales.orders;drop", "not a model name"),
        ("/sluice diff `sales`.`orders`", "not a model name"),
        ("/sluice diff sales.orders other.table", "exactly one model"),
        ("/sluice diff sales.orders --limit 5", "unknown option `--limit`"),
        ("/sluice diff sales.orders --where", "needs a SQL condition"),
        ("/sluice diff sales.orders --where ''", "needs a SQL condition"),
        ("/sluice diff 'sales.orders", "cannot read the arguments"),
    ],
)
def test_diff_bad_arguments_reply_with_usage(body: str, why: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(body)
    assert info.value.message == USAGE["diff"]
    assert why in str(info.value.hint)


def test_help_lists_every_command_and_who_may_run_them() -> None:
    for usage in USAGE.values():
        assert usage.strip("`").split(" [")[0] in HELP
    assert "write permission" in HELP
    # The help text, posted as a reply, must not read as a command itself.
    assert parse_command(HELP) is None
