#!/usr/bin/env python3
"""Ask LPS for the lowest price of a few products and print the answers.

    LPS_ADDR=http://127.0.0.1:50051 LPS_TOKEN=... \\
        .venv/bin/python lowest_price.py "삼다수 2L x 12" "서울우유 1L 2개"

Calls lps.v1.SearchService: `Search` once (with an idempotency key, so a retry after a
timeout or UNAVAILABLE cannot create a second search), then `WatchSearch` until the
search is final (resuming from the last version seen if the stream breaks), then prints
one line per product:

    삼다수 2L x 12: ₩12,900 at testmall-alpha (free shipping) 제주 삼다수 2L x 12병
    세상에 없는 상품 9999: not found (testmall-alpha, testmall-beta, testmall-gamma)

A product whose malls all failed gets a line saying which failed (the search itself
ended, so the exit code is still 0). A failed call prints its status and the google.rpc
error details LPS attaches (a BadRequest field violation for INVALID_ARGUMENT, RetryInfo
for UNAVAILABLE, ErrorInfo for auth refusals) and exits 1. The stubs come from build.sh
(gen/, not committed).
"""

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402
from lps.v1 import common_pb2, search_pb2, search_pb2_grpc  # noqa: E402

FINAL_STATES = {
    common_pb2.JOB_STATE_DONE,
    common_pb2.JOB_STATE_DEAD,
    common_pb2.JOB_STATE_CANCELLED,
}
SHIPPING = {
    common_pb2.SHIPPING_STATUS_FREE: "free shipping",
    common_pb2.SHIPPING_STATUS_FREE_BY_THRESHOLD: "free shipping over the threshold",
    common_pb2.SHIPPING_STATUS_UNKNOWN: "shipping unknown",
}


def won(amount):
    return f"₩{amount:,}"


def shipping(offer):
    if offer.shipping == common_pb2.SHIPPING_STATUS_PAID:
        return f"{won(offer.price)} + {won(offer.shipping_fee)} shipping"
    return SHIPPING.get(offer.shipping, "shipping unknown")


def channel(addr):
    """`http://host:port` or `host:port` is plaintext; `https://` uses TLS (LPS_CA_CERT)."""
    if addr.startswith("https://"):
        roots = None
        if ca := os.environ.get("LPS_CA_CERT"):
            with open(ca, "rb") as f:
                roots = f.read()
        return grpc.secure_channel(
            addr.removeprefix("https://"), grpc.ssl_channel_credentials(roots)
        )
    return grpc.insecure_channel(addr.removeprefix("http://"))


def describe(error):
    """The status of a failed call and the google.rpc details LPS put in it."""
    lines = [f"{error.code().name}: {error.details()}"]
    status = rpc_status.from_call(error)  # None when the server sent no details
    for detail in status.details if status else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            lines += [
                f"  field violation: {v.field}: {v.description}" for v in bad.field_violations
            ]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            lines.append(f"  retry after {info.retry_delay.ToTimedelta().total_seconds()} s")
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            lines.append(f"  error info: reason {info.reason}, domain {info.domain}")
        else:
            lines.append(f"  detail {detail.type_url}")
    return "\n".join(lines)


def retry_delay(error):
    """Seconds to wait before retrying a Search, or None: do not retry. UNAVAILABLE says how
    long in its RetryInfo; after DEADLINE_EXCEEDED the search may have been stored, and the
    retry with the same idempotency key returns it."""
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return 0.0
    if error.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    status = rpc_status.from_call(error)
    for detail in status.details if status else []:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info.retry_delay.ToTimedelta().total_seconds()
    return 1.0


def search(stub, request, metadata, attempts=3):
    """Search, retried while retry_delay says so: the idempotency key makes a retry return the
    first search, never a second one."""
    for attempt in range(1, attempts + 1):
        try:
            return stub.Search(request, metadata=metadata, timeout=10)
        except grpc.RpcError as error:
            delay = retry_delay(error)
            if delay is None or attempt == attempts:
                raise
            print(f"search: {error.code().name}, retrying in {delay} s", file=sys.stderr)
            time.sleep(delay)


def watch(stub, search_id, metadata, timeout):
    """Follow the search until it is final; a broken stream resumes after the last version."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"search {search_id} not final after {timeout} s")
        request = search_pb2.WatchSearchRequest(
            search_id=search_id, after_version=last.version if last else 0
        )
        try:
            for status in stub.WatchSearch(request, metadata=metadata, timeout=remaining):
                last = status
                malls = [m for p in status.products for m in p.malls]
                done = sum(m.state in FINAL_STATES for m in malls)
                print(
                    f"search {search_id} v{status.version}: {done}/{len(malls)} done",
                    file=sys.stderr,
                )
                if status.final:
                    return status
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            print(f"watch: {error.code().name}, resuming", file=sys.stderr)
            time.sleep(1)


def mall_lines(product):
    """A line per mall that found the product: its first offer, as LPS lists them (known
    shipping first, cheapest first). `effective_price` is set only when shipping is known:
    an offer whose shipping could not be read is shown as its price plus unknown shipping,
    never as if shipping were free."""
    lines = []
    for m in product.malls:
        if not m.offers:
            continue
        first = m.offers[0]
        if first.HasField("effective_price"):
            lines.append(f"  {m.mall}: {won(first.effective_price)} ({shipping(first)})")
        else:
            lines.append(f"  {m.mall}: {won(first.price)} + shipping unknown")
    return "".join(f"\n{line}" for line in lines)


def answer(product):
    """The lines for one product of a final search: its answer, then each mall's."""
    return first_line(product) + mall_lines(product)


def first_line(product):
    """The product's answer: its lowest, or why there is none."""
    name = product.product.name
    if product.HasField("lowest"):
        low = product.lowest
        line = f"{name}: {won(low.effective_price)} at {low.mall} ({shipping(low)}) {low.title}"
        if product.HasField("possibly_lower"):
            maybe = product.possibly_lower
            line += f"\n  possibly lower: {won(maybe.price)} at {maybe.mall} (shipping unknown)"
        return line
    malls = ", ".join(m.mall for m in product.malls)
    if all(m.outcome == common_pb2.OUTCOME_NOT_FOUND for m in product.malls):
        return f"{name}: not found ({malls})"
    if product.HasField("possibly_lower"):
        maybe = product.possibly_lower
        return f"{name}: no known lowest; {won(maybe.price)} at {maybe.mall} (shipping unknown)"
    failed = [
        f"{m.mall} {common_pb2.ErrorClass.Name(m.error_class)}"
        for m in product.malls
        if m.state == common_pb2.JOB_STATE_DEAD
    ]
    return f"{name}: no answer (failed: {', '.join(failed) or 'none'}; malls: {malls})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("products", nargs="+", help="product names, as a shopper types them")
    parser.add_argument("--addr", default=os.environ.get("LPS_ADDR", "http://127.0.0.1:50051"))
    parser.add_argument("--caller", default="python-example", help="x-lps-caller: who is asking")
    parser.add_argument("--mall", action="append", default=[], help="only these malls (repeatable)")
    parser.add_argument("--idempotency-key", default=str(uuid.uuid4()))
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the answer")
    args = parser.parse_args()
    token = os.environ.get("LPS_TOKEN")  # a secret: from the environment, never an argument
    if not token:
        parser.error("set LPS_TOKEN to a client token (the coordinator's LPS_CLIENT_TOKENS)")

    metadata = [("authorization", f"Bearer {token}"), ("x-lps-caller", args.caller)]
    request = search_pb2.SearchRequest(
        products=[common_pb2.Product(name=name) for name in args.products],
        malls=args.mall,
        priority_class=common_pb2.PRIORITY_CLASS_INTERACTIVE,
        idempotency_key=args.idempotency_key,
    )
    with channel(args.addr) as chan:
        stub = search_pb2_grpc.SearchServiceStub(chan)
        try:
            accepted = search(stub, request, metadata)
            print(f"search {accepted.search_id}: {len(accepted.items)} items", file=sys.stderr)
            final = watch(stub, accepted.search_id, metadata, args.timeout)
        except grpc.RpcError as error:
            print(describe(error), file=sys.stderr)
            return 1
        except TimeoutError as error:
            print(error, file=sys.stderr)
            return 1
    for product in final.products:
        print(answer(product))
    return 0


if __name__ == "__main__":
    sys.exit(main())
