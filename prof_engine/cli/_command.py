"""The CLI's command classes: help and usage errors without pydantic.

typer (0.29) coerces each parameter it processes through a pydantic validator that it builds on
first use; the first one imports pydantic (~0.2 s of CPU, twice `import typer`). Two cases build one
for nothing: its `--help` flag defaults to None, not False (a bool flag that yields a bool skips
the validator), and an argument left out is coerced before click says it is missing. These classes
mend both on the CLI's own commands (`cls=`), so that `--help`, `<command> --help`, an unknown option
and a command given no arguments answer at the cost of typer alone (benchmarks/startup.py).
"""

from __future__ import annotations

# typer vendors click as `typer._click` since 0.26 (pyproject asks for it)
from typer._click import Context
from typer._click.exceptions import MissingParameter
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


def _help_default_false(option: TyperOption | None) -> TyperOption | None:
    """The help flag, defaulting to False (see the module's docstring); None where there is none."""
    if option is not None:
        option.default = False
    return option


class Group(TyperGroup):
    """`prof-engine` itself: its help flag defaults to False."""

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_default_false(super().get_help_option(ctx))


class Command(TyperCommand):
    """A subcommand: its help flag defaults to False, and given no arguments at all it names its first
    missing required parameter before typer builds a validator for it, the error click raises after."""

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_default_false(super().get_help_option(ctx))

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        # with nothing on the command line, click processes the parameters in declaration order and
        # fails on the first required one without a value: the same one, the same error, found here
        if not args and not ctx.resilient_parsing:
            for param in self.get_params(ctx):
                value, _ = param.consume_value(ctx, {})  # environment, default map, default: no coercion
                if isinstance(param, (TyperArgument, TyperOption)) and param.required and param.value_is_missing(value):
                    raise MissingParameter(ctx=ctx, param=param)
        return super().parse_args(ctx, args)
