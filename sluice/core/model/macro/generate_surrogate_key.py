"""``@GENERATE_SURROGATE_KEY(a, b, ...[, hash_function := 'MD5'])``: a hash of the fields.

>>> from sluice.core.model.macro import expand_sql
>>> expand_sql("SELECT @GENERATE_SURROGATE_KEY(a, b) FROM t")
"SELECT MD5(CONCAT(COALESCE(CAST(a AS STRING), '_sqlmesh_surrogate_key_null_'), '|', COALESCE(CAST(b AS STRING), '_sqlmesh_surrogate_key_null_'))) FROM t"
"""

from __future__ import annotations

from sqlglot import exp

from sluice.core.model.macro.evaluator import Evaluator
from sluice.core.model.macro.registry import MacroError, Result, operator, text_of

NULL_MARK = "_sqlmesh_surrogate_key_null_"
_HASHES = {"MD5", "SHA1", "SHA", "SHA2", "SHA256", "SHA512"}


@operator("GENERATE_SURROGATE_KEY", (), varargs="fields", min_rest=1, keywords=("hash_function",))
def generate_surrogate_key(
    ev: Evaluator, args: dict[str, exp.Expr], rest: list[exp.Expr]
) -> Result:
    fields = [ev.value(f, "a field") for f in rest]
    if not fields:
        raise MacroError(
            "@GENERATE_SURROGATE_KEY needs at least one field",
            "write @GENERATE_SURROGATE_KEY(a, b)",
        )
    hash_name = (
        text_of(ev.value(args["hash_function"]), "hash_function", "GENERATE_SURROGATE_KEY").upper()
        if "hash_function" in args
        else "MD5"
    )
    if hash_name not in _HASHES:
        raise MacroError(
            f"@GENERATE_SURROGATE_KEY: unknown hash_function '{hash_name}'",
            f"use one of {', '.join(sorted(_HASHES))}",
        )
    parts: list[exp.Expr] = []
    for index, field in enumerate(fields):
        if index:
            parts.append(exp.Literal.string("|"))
        parts.append(
            exp.func(
                "COALESCE",
                exp.cast(field, exp.DataType.build("TEXT")),
                exp.Literal.string(NULL_MARK),
            )
        )
    concat = exp.Concat(expressions=parts)
    if hash_name == "MD5":
        return exp.MD5(this=concat)
    if hash_name in ("SHA", "SHA1"):
        return exp.SHA(this=concat)
    bits = {"SHA2": 256, "SHA256": 256, "SHA512": 512}[hash_name]
    return exp.SHA2(this=concat, length=exp.Literal.number(bits))
