"""A bundled, dated table of EC2 on-demand prices, for the cost ``hadar cluster up`` shows
before it launches anything. Prices change and differ by region: the table says when it was
taken and for which region, and :func:`estimate` says when it is stale or does not cover a type.

Source: AWS's public on-demand price list (Linux, shared tenancy) for us-east-1, as of
:data:`AS_OF`. Spot instances cost less and vary by the hour; their cap is ``aws.spot_max_price``
or, without it, the on-demand price.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence

from hadar.providers.lifecycle import CostLine, LaunchCost

AS_OF = dt.date(2024, 6, 1)
REGION = "us-east-1"
STALE_AFTER_DAYS = 180
PRICES_URL = "https://aws.amazon.com/ec2/pricing/on-demand/"

USD_PER_HOUR: Mapping[str, float] = {
    "p2.xlarge": 0.90,
    "p2.8xlarge": 7.20,
    "p2.16xlarge": 14.40,
    "p3.2xlarge": 3.06,
    "p3.8xlarge": 12.24,
    "p3.16xlarge": 24.48,
    "p4d.24xlarge": 32.7726,
    "g4dn.xlarge": 0.526,
    "g4dn.2xlarge": 0.752,
    "g4dn.4xlarge": 1.204,
    "g4dn.8xlarge": 2.176,
    "g4dn.12xlarge": 3.912,
    "g4dn.16xlarge": 4.352,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.4xlarge": 1.624,
    "g5.12xlarge": 5.672,
    "g6.xlarge": 0.8048,
    "t3.micro": 0.0104,
    "t3.small": 0.0208,
    "t3.medium": 0.0416,
}
"""On-demand USD per instance-hour (us-east-1, Linux, :data:`AS_OF`)."""


def estimate(
    instance_types: Sequence[str],
    *,
    region: str | None,
    spot: bool = False,
    spot_max_price: str | None = None,
    today: dt.date | None = None,
) -> LaunchCost:
    """The hourly cost of launching one instance of each of ``instance_types`` (on-demand
    prices from the bundled table; the spot cap with ``spot``), with a note for every reason the
    figure may be wrong: unknown types, another region, a stale table, spot prices."""
    counts = Counter(instance_types)
    market = " (spot)" if spot else ""
    lines = []
    for itype in sorted(counts):
        price = float(spot_max_price) if spot and spot_max_price else USD_PER_HOUR.get(itype)
        lines.append(CostLine(f"{itype}{market}", counts[itype], price))
    notes = []
    unknown = [
        t for t, line in zip(sorted(counts), lines, strict=True) if line.usd_per_hour is None
    ]
    if unknown:
        notes.append(f"no price in the bundled table for {', '.join(unknown)} (not counted)")
    if spot:
        notes.append(
            "spot: the figure is the most you pay (aws.spot_max_price)"
            if spot_max_price
            else "spot: the figure is the on-demand price, the most a spot instance costs"
        )
    if region and region != REGION:
        notes.append(f"prices are {REGION}'s; {region} differs")
    age = ((today or dt.date.today()) - AS_OF).days
    if age > STALE_AFTER_DAYS:
        notes.append(f"prices from {AS_OF.isoformat()} ({age} days old, stale): check {PRICES_URL}")
    return LaunchCost(tuple(lines), tuple(notes))
