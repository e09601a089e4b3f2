"""Children started as if from a terminal, where Ctrl-C raises KeyboardInterrupt."""

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """A `preexec_fn`: a shell starts background jobs (CI's, say) with SIGINT ignored, and a child inherits that,
    so Python would never install its Ctrl-C handler; a person's terminal has SIGINT at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
