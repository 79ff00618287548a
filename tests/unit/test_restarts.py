"""handler/cli/restarts.py: the back-off of workers that die early, and the start limit that stops ``oip serve``."""

from __future__ import annotations

from handler.cli.restarts import BURST, EARLY_SECONDS, MAX_DELAY, WINDOW, Restarts


def test_each_early_death_doubles_the_delay_up_to_its_cap_and_the_burst_stops() -> None:
    restarts = Restarts()
    delays = [restarts.delay(float(second)) for second in range(BURST)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, MAX_DELAY, MAX_DELAY, None]


def test_early_deaths_older_than_the_window_are_forgotten() -> None:
    restarts = Restarts()
    for second in range(BURST - 1):  # one short of the burst
        restarts.delay(float(second))
    assert restarts.delay(WINDOW + BURST - 2.5) == 0.2  # the last one before it is still within the window
    assert restarts.delay(3 * WINDOW) == 0.1


def test_a_death_is_early_before_serving_or_soon_after() -> None:
    assert Restarts.early(100.0, None)
    assert Restarts.early(100.0, 100.0 - EARLY_SECONDS / 2)
    assert not Restarts.early(100.0, 100.0 - EARLY_SECONDS * 2)
