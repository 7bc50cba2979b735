"""The installed package's type information: py.typed and the C extension's stub are shipped, and
mypy --strict, reading them as a user's checker does, takes the documented calls (exemplars
included) and refuses a string where a number goes."""

import os
import subprocess
import sys

import ringside
from conftest import missing

USER_CODE = '''
import ringside

bot = ringside.attach("typed")
fill = bot.histogram("fill", unit="s", labelnames=("symbol",))
aapl: ringside.Histogram = fill.labels("AAPL")
wrote: bool = aapl.observe(0.0012)
aapl.observe(0.0012, exemplar={"order_id": "A17"})
aapl.observe(1, {"order_id": "A17"})
with aapl.time():
    pass
with aapl.time(exemplar={"order_id": "A17"}) as timer:
    timer.exemplar = {"order_id": "A18"}


@aapl.time()
def send(n: int) -> str:
    return str(n)


sent: str = send(1)
token: int = aapl.start()
aapl.stop(token)
aapl.stop(token, exemplar={"order_id": "A17"})
bot.counter("orders", labelnames=("side",)).labels(side="buy").inc()
level = bot.gauge("level")
level.set(1.5)
level.dec(2)
bot.histogram("slippage_bps", resolution=0.01, signed=True).observe(-3.5)
bot.counter("commission_usd", resolution=1e-6).inc(0.37)
sent_orders: ringside.Counter = ringside.Counter("sent", "Orders sent", ["side"], registry=bot)
sent_orders.labels("buy").inc()
ringside.Histogram("lat", "Latency", unit="s", buckets=[0.1, 1.0], registry=bot).observe(0.1)
ringside.Gauge("depth", "Book depth", registry=bot).set(3)
bot.counter("fills", "Fills", ("side",)).labels("sell").inc()
bot.close()
aapl.observe("0.1")  # the one error
'''


def test_the_package_ships_its_type_information():
    package = os.path.dirname(ringside.__file__)
    assert os.path.isfile(os.path.join(package, "py.typed"))
    assert os.path.isfile(os.path.join(package, "_ringside.pyi"))


def test_mypy_checks_user_code_against_the_installed_package(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        missing("mypy is not installed (pip install mypy)")
    (tmp_path / "user.py").write_text(USER_CODE)
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull, "user.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stdout + result.stderr
    line = USER_CODE.splitlines().index('aapl.observe("0.1")  # the one error') + 1
    assert errors[0].startswith(f'user.py:{line}: error: Argument 1 to "observe" of "Histogram" has incompatible type '
                                '"str"'), errors
