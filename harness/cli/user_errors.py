"""How the command line reports a user's mistake: one `error: <problem and fix>` line and exit 2, no traceback.

Ctrl-C and stop signals before a run's record exists exit 128 + the signal with one line; click's own usage
errors (a missing option, a typo in a flag) take the same one-line shape.
"""

from __future__ import annotations

import functools
import sys

import click

from rlbench.harness.errors import RLBenchError


def user_errors(fn):
    """Turn RLBenchError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rlbench.harness.run.exceptions import RunInterrupted
        from rlbench.harness.run.stop_signals import RunStop, describe

        try:
            return fn(*args, **kwargs)
        except RunInterrupted as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except RunStop as stop:  # SIGTERM/SIGHUP/SIGINT while `run` read its inputs, before any record
            click.echo(
                f"error: interrupted by {describe(stop.signum)} before the framework started; nothing was recorded",
                err=True,
            )
            sys.exit(128 + stop.signum)
        except RLBenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo(f"error: {_interrupted(fn.__name__)}", err=True)
            sys.exit(130)
        except OSError as exc:  # a file-system error no command foresaw: still one line naming the file and the fix
            click.echo(f"error: {file_system_error(exc)}", err=True)
            sys.exit(2)
        except RecursionError:  # a JSON or YAML input nested thousands deep: the parser's recursion gave out
            click.echo(
                "error: an input file is nested too deeply to read (thousands of levels); rlbench's inputs are a "
                "few levels deep: check the file you passed",
                err=True,
            )
            sys.exit(2)

    return wrapper


def file_system_error(exc: OSError) -> str:
    """`<path>: <what the OS said>; <what to do>` for an OSError."""
    import errno

    where = f"{exc.filename}: " if exc.filename else ""
    fix = {
        errno.EROFS: "the file system is read-only: point RLBENCH_CACHE, --out or HOME at a writable folder",
        errno.EACCES: "no permission: point RLBENCH_CACHE, --out or HOME at a folder you can write, or fix its mode",
        errno.EPERM: "not permitted: point RLBENCH_CACHE, --out or HOME at a folder you can write",
        errno.ENOSPC: "the disk is full: free some space or point RLBENCH_CACHE or --out elsewhere",
        errno.EDQUOT: "the disk quota is used up: free some space or point RLBENCH_CACHE or --out elsewhere",
    }.get(exc.errno, "check the path and try again")
    return f"{where}{exc.strerror or exc}; {fix}"


def _interrupted(command: str) -> str:
    """What a Ctrl-C stopped: `run` before its framework (it records every later stop itself), any other
    command simply where it was."""
    if command == "run":
        return "interrupted before the framework started; nothing was recorded"
    return f"interrupted by Ctrl-C; rlbench {command} stopped before it finished"


class OneLineErrors(click.Group):
    """Click's own usage errors (`--steps abc`, a missing option, a typo in a flag) as one `error:` line and
    exit 2, the same shape as an RLBenchError, instead of click's usage block and capitalised "Error:"."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except getattr(click.exceptions, "NoArgsIsHelpError", ()) as exc:  # bare `rlbench`: the help, as click does
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            hint = f"; see `{ctx.command_path} -h`" if ctx is not None else ""
            click.echo(f"error: {exc.format_message().rstrip('.')}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:  # Ctrl-C or EOF outside a command (commands handle their own)
            click.echo("error: aborted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)  # --help and --version return 0
