"""The simulated clock as prompts show it."""


def clock_text(time_h: float) -> str:
    """``day 2, 07:00`` for ``time_h = 31``."""
    return f"day {int(time_h // 24) + 1}, {int(time_h % 24):02d}:00"
