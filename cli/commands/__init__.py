"""The subcommands of ``kvsched``, one module each; each defines ``register(subparsers)``, which
adds its parser and sets ``func``. ``report_history`` is no subcommand: it is the ``--history``
half of ``report``. The exit codes are :class:`kvsched.spec.vocabulary.ExitCode`."""


class UsageError(Exception):
    """Bad arguments or invalid input that argparse cannot catch; exits 2 with the message."""
