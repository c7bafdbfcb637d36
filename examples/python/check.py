#!/usr/bin/env python3
"""CI check of the Python example against a running LPS stack with the test malls.

    LPS_ADDR=... LPS_TOKEN=... .venv/bin/python check.py   (ci.sh starts the stack)

Runs lowest_price.py as a user would and checks what it prints:
- for products of the test catalog (test-kit/catalog.toml) the lowest effective price and
  its mall are the catalog's truth (the rules in the catalog's header), and a product no
  mall sells is reported as not found; the example exits 0;
- each mall's line (the mall's first offer, as a client reading only `offers[0]` sees it)
  shows an effective price only for a listing of that mall whose shipping the catalog
  states, never an unknown-shipping listing's price as if shipping were free;
- an invalid request (a product name over 200 characters) exits 1 with INVALID_ARGUMENT
  and the google.rpc.BadRequest field violation naming `products[1].name`;
- an unknown token exits 1 with UNAUTHENTICATED and ErrorInfo reason UNKNOWN_TOKEN.
Exits 1 when any check fails.
"""

import os
import re
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG = os.path.join(HERE, "..", "..", "test-kit", "catalog.toml")
EXAMPLE = os.path.join(HERE, "lowest_price.py")

# Catalog names (the query a shopper starts with): a free-shipping lowest that gamma's lazy
# loading and fee traps must not undercut, a lowest that is the cheaper one only with its
# shipping fee added, and a product no mall sells.
FOUND = ["삼다수 2L x 12", "서울우유 1L 2개"]
MISSING = "세상에 없는 상품 9999"

FOUND_LINE = re.compile(r"^(?P<name>.+?): ₩(?P<price>[\d,]+) at (?P<mall>\S+) \(")
NOT_FOUND_LINE = re.compile(r"^(?P<name>.+?): not found \(")
MALL_LINE = re.compile(r"^  (?P<mall>testmall-\S+): ₩(?P<price>[\d,]+) (?P<rest>.*)$")


def shipping_fee(listing):
    """The fee a listing's card states, None when unknown (catalog.toml's TRUTH RULES)."""
    delivery = listing.get("delivery", "fee")
    reaches = "free_over" in listing and listing["price"] >= listing["free_over"]
    if delivery == "fee":
        return listing["shipping"]
    if delivery == "free_over":
        return 0 if reaches else None
    if delivery == "fee_free_over":
        return 0 if reaches else listing["shipping"]
    return None  # missing


def catalog_lowest(name):
    """(effective price, mall id) of the product's lowest over every mall, or None."""
    with open(CATALOG, "rb") as f:
        products = tomllib.load(f)["products"]
    product = next((p for p in products if p["name"] == name), None)
    if product is None:
        return None
    priced = [
        (listing["price"] + shipping_fee(listing), f"testmall-{listing['mall']}")
        for listing in product["listings"]
        if listing.get("kind", "normal") == "normal" and shipping_fee(listing) is not None
    ]
    return min(priced) if priced else None


def known_prices(name, mall):
    """The effective prices of `mall`'s listings of the product whose shipping the card
    states (any kind: the profile decides which it shows)."""
    with open(CATALOG, "rb") as f:
        products = tomllib.load(f)["products"]
    product = next((p for p in products if p["name"] == name), None)
    return {
        listing["price"] + shipping_fee(listing)
        for listing in (product or {}).get("listings", [])
        if f"testmall-{listing['mall']}" == mall and shipping_fee(listing) is not None
    }


def run(products, token=None, timeout=240):
    env = dict(os.environ)
    if token is not None:
        env["LPS_TOKEN"] = token
    cmd = [sys.executable, EXAMPLE, "--caller", "python-example-ci", *products]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    shown = " ".join(repr(p if len(p) <= 40 else p[:20] + "…") for p in products)
    print(f"$ lowest_price.py {shown}  (exit {done.returncode})")
    print(done.stdout, end="")
    print("".join(f"  | {line}\n" for line in done.stderr.splitlines()[-6:]), end="")
    return done


def main():
    results = []

    def check(ok, what):
        results.append(ok)
        print(f"{'ok' if ok else 'FAIL'} - {what}")

    done = run([*FOUND, MISSING])
    check(done.returncode == 0, "the example exits 0")
    answers = {}
    mall_answers = []
    current = None
    for line in done.stdout.splitlines():
        if m := MALL_LINE.match(line):
            mall_answers.append((current, m["mall"], int(m["price"].replace(",", "")), m["rest"]))
        elif m := FOUND_LINE.match(line):
            current = m["name"]
            answers[m["name"]] = (int(m["price"].replace(",", "")), m["mall"])
        elif m := NOT_FOUND_LINE.match(line):
            answers[m["name"]] = "not found"
    check(len(mall_answers) >= len(FOUND), f"a line per mall that found a product ({len(mall_answers)})")
    for name, mall, price, rest in mall_answers:
        if rest == "+ shipping unknown":
            continue
        check(
            price in known_prices(name, mall),
            f"{name!r} at {mall}: the first offer's ₩{price:,} is a listing with known shipping",
        )
    for name in FOUND:
        expected = catalog_lowest(name)
        check(expected is not None, f"{name!r} is in the test catalog")
        check(
            answers.get(name) == expected,
            f"{name!r}: lowest {answers.get(name)}, catalog says {expected}",
        )
    check(catalog_lowest(MISSING) is None, f"{MISSING!r} is not in the test catalog")
    check(
        answers.get(MISSING) == "not found",
        f"{MISSING!r}: {answers.get(MISSING)}, expected not found",
    )

    done = run(["삼다수 2L x 12", "가" * 201])
    check(done.returncode == 1, "an invalid request exits 1")
    check("INVALID_ARGUMENT" in done.stderr, "an invalid request is INVALID_ARGUMENT")
    check(
        re.search(r"field violation: products\[1\]\.name: ", done.stderr) is not None,
        "its BadRequest field violation names products[1].name",
    )

    done = run(["삼다수 2L x 12"], token="not-a-token")
    check(
        done.returncode == 1 and "UNAUTHENTICATED" in done.stderr,
        "an unknown token is UNAUTHENTICATED",
    )
    check("reason UNKNOWN_TOKEN, domain lps.v1" in done.stderr, "its ErrorInfo says UNKNOWN_TOKEN")

    print(f"python example: {sum(results)} of {len(results)} checks passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
