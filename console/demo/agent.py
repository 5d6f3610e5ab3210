"""The DEMO AGENT — a script agent (DESIGN §4) that makes real, scripted edits to the
demo project. It is not a model: what it writes depends on the task and on the model
name it is given, so that a demo run shows escalations, reflections, SLA events and a
phase gate. Task JSON on stdin; exit 0 claims success.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

RESTOCK = '''"""Restocking."""

from inventory.stock import Stock


def restock(stock: Stock, item: str, amount: int) -> int:
    """Add `amount` of `item`; returns the new count."""
    stock.add(item, amount)
    return stock.count(item)
'''
RESTOCK_TEST = '''from inventory.restock import restock
from inventory.stock import Stock


def test_restock_adds_to_the_count() -> None:
    stock = Stock({"apple": 2})
    assert restock(stock, "apple", 3) == 5
'''
REPORT_OK = '''"""Low-stock report."""

from inventory.stock import Stock


def low_stock(stock: Stock, threshold: int) -> list[str]:
    """Items with fewer than `threshold` left, alphabetically."""
    return sorted(item for item, count in stock.items() if count < threshold)
'''
REPORT_BAD = '''"""Low-stock report."""

from inventory.stock import Stock


def low_stock(stock: Stock, threshold: int) -> list[str]:
    """Items with fewer than `threshold` left, alphabetically."""
    return sorted(item for item, count in stok.items() if count < threshold)
'''
REPORT_TEST = '''from inventory.report import low_stock
from inventory.stock import Stock


def test_low_stock_lists_items_under_the_threshold() -> None:
    assert low_stock(Stock({"b": 1, "a": 0, "c": 9}), 2) == ["a", "b"]
'''
DISCOUNT = '''"""Bulk discounts."""


def bulk_price(unit_price: float, quantity: int) -> float:
    """10 % off from 10 items, 20 % off from 100."""
    rate = {rate}
    return round(unit_price * quantity * (1 - rate), 2)
'''
DISCOUNT_RATES = {
    "haiku": "0.1 if quantity > 10 else 0.0",  # off by one at 10 and misses 100
    "sonnet": "0.2 if quantity >= 100 else 0.1",  # discounts even a single item
    "opus": "0.2 if quantity >= 100 else 0.1 if quantity >= 10 else 0.0",
}
DISCOUNT_TEST = '''from inventory.discount import bulk_price


def test_no_discount_below_ten() -> None:
    assert bulk_price(2.0, 9) == 18.0


def test_ten_percent_from_ten() -> None:
    assert bulk_price(2.0, 10) == 18.0


def test_twenty_percent_from_a_hundred() -> None:
    assert bulk_price(1.0, 100) == 80.0
'''


def write(path: str, text: str) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def main() -> int:
    task = json.load(sys.stdin)
    tid, model = task["id"], task["model"]
    print(f"demo agent: {tid} ({task['title']}) on {model}, attempt {task['attempt']}")
    if "Prior iteration reflections" in task["prompt"]:
        print("demo agent: read the reflections of the earlier attempts")
    print('BERNSTEIN_USAGE {"input_tokens": 12000, "output_tokens": 2500}')
    time.sleep(0.3)
    if tid == "DEMO-01":
        write("src/inventory/restock.py", RESTOCK)
        write("tests/test_restock.py", RESTOCK_TEST)
    elif tid == "DEMO-02":
        write("src/inventory/report.py", REPORT_OK if model != "haiku" else REPORT_BAD)
        write("tests/test_report.py", REPORT_TEST)
    elif tid == "DEMO-03":
        rate = DISCOUNT_RATES.get(model, DISCOUNT_RATES["opus"])
        write("src/inventory/discount.py", DISCOUNT.replace("{rate}", rate))
        write("tests/test_discount.py", DISCOUNT_TEST)
    elif tid == "DEMO-04":
        print("I'm not sure how the legacy engine rounds; partial implementation only.")
        return 1
    elif tid == "DEMO-06":
        time.sleep(8)  # slower than its SLA
        write("docs/export.md", "# Nightly export\n\nRuns at 02:00 UTC.\n")
    elif tid == "DEMO-07":
        write("docs/typo.md", "Inventory, not inventroy.\n")
    elif tid == "DEMO-08":
        write("tests/test_integration.py",
              "from inventory.report import low_stock\nfrom inventory.restock import restock\n"
              "from inventory.stock import Stock\n\n\ndef test_restock_clears_low_stock() -> None:"
              "\n    stock = Stock({\"a\": 0})\n    restock(stock, \"a\", 5)\n"
              "    assert low_stock(stock, 2) == []\n")
    elif tid in ("DEMO-09", "DEMO-10"):
        name = "summary" if tid == "DEMO-09" else "export"
        body = "stock.items()" if model != "haiku" else "stok.items()"  # haiku: a typo
        write(f"src/inventory/{name}.py",
              f'"""{task["title"]}."""\n\nfrom inventory.stock import Stock\n\n\n'
              f"def {name}(stock: Stock) -> list[str]:\n"
              f"    return [f\"{{item}},{{count}}\" for item, count in {body}]\n")
    else:
        slug = tid.lower().replace("-", "_")
        write(f"docs/{slug}.md", f"# {task['title']}\n\nWritten by the demo agent on {model}.\n")
    print("demo agent: done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
