"""A landing area nobody simulated, written by hand: three days of a small shop's search logs and catalogue.

Forty products (ten kinds in four variants, ids ``P1001`` .. ``P1040``); each day every live product is searched
once, by a phrasing of the day (``"cordless drill"``, ``"drill cordless"``, ``"cordless drill kit"``: 120 queries, so
the held-out tenth has a dozen), and shown five products (its own, the three other variants of its kind and one of
another kind), its own clicked. Day 1: clicks as JSON Lines and the catalogue as a CSV snapshot without ``P1040``, plus
one shown row of a product no catalogue has (``P9999``, quarantined). Day 2: clicks as CSV, a catalogue delta
launching ``P1040`` and retitling ``P1001``. Day 3: clicks as a TREC Session XML log, no catalogue file (day 2's
is carried).
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
from pathlib import Path
from xml.sax.saxutils import escape

DAYS = (dt.date(2026, 3, 1), dt.date(2026, 3, 2), dt.date(2026, 3, 3))
KINDS = ("drill", "hammer", "saw", "wrench", "ladder", "faucet", "lamp", "hose", "shovel", "sander")
VARIANTS = ("cordless", "steel", "outdoor", "compact")
EXTRAS = ("kit", "pro", "set", "plus")
FIELDS = ("ts", "user_id", "session_id", "impression_id", "query", "doc_id", "title", "position", "clicked")
UNKNOWN = "P9999"  # shown on day 1, in no catalogue
LAUNCHED, RETITLED = "P1040", "P1001"  # launched on day 2; retitled on day 2


def products() -> dict[str, tuple[str, str]]:
    """Product id -> (query that finds it, its first catalogue title)."""
    out = {}
    for i, (kind, variant) in enumerate((k, v) for k in KINDS for v in VARIANTS):
        out[f"P{1001 + i}"] = (f"{variant} {kind}", f"{variant.title()} {kind.title()} {EXTRAS[i % 4].title()} {i + 1}")
    return out


def titles_on(day: dt.date) -> dict[str, str]:
    """The live catalogue's raw titles on ``day``."""
    live = {pid: title for pid, (_, title) in products().items()}
    if day == DAYS[0]:
        live.pop(LAUNCHED)
    else:
        live[RETITLED] += " Brushless"
    return live


def phrasing(query: str, title: str, day: dt.date) -> str:
    """How ``query`` is typed on ``day``: as it is, its words swapped, or with the title's third word."""
    variant, kind = query.split()
    return (query, f"{kind} {variant}", f"{query} {title.split()[2].lower()}")[DAYS.index(day)]


def searches(day: dt.date) -> list[dict]:
    """The day's shown rows: one impression per live product, five products each, its own clicked."""
    rng, live, catalogue = random.Random(day.toordinal()), titles_on(day), products()
    rows = []
    for n, pid in enumerate(sorted(live)):
        query, kind = phrasing(*catalogue[pid], day), catalogue[pid][0].split()[1]
        same = [p for p in live if p != pid and catalogue[p][0].endswith(kind)]
        other = rng.choice([p for p in live if not catalogue[p][0].endswith(kind)])
        shown = [pid, *same, other][:5]
        rng.shuffle(shown)
        if day == DAYS[0] and n == 0:
            shown.append(UNKNOWN)
        user = n % 20  # two searches per user, 20 minutes apart: nobody is a bot
        ts = dt.datetime.combine(day, dt.time(8), tzinfo=dt.timezone.utc) + dt.timedelta(minutes=n // 20 * 20 + user)
        for position, shown_id in enumerate(shown, start=1):
            rows.append({"ts": ts.isoformat(), "user_id": f"u{user}", "session_id": f"s{n}", "impression_id": f"i{n}",
                         "query": query, "doc_id": shown_id, "title": live.get(shown_id, "Mystery Gadget"),
                         "position": position, "clicked": shown_id == pid})
    return rows


def trec_xml(rows: list[dict]) -> str:
    """``rows`` as a TREC Session log: one session per impression (user = session), times relative to midnight."""
    out = ["<sessiontrack2013>"]
    impressions: dict[str, list[dict]] = {}
    for row in rows:
        impressions.setdefault(row["impression_id"], []).append(row)
    for number, shown in enumerate(impressions.values(), start=1):
        ts = dt.datetime.fromisoformat(shown[0]["ts"])
        start = (ts - ts.replace(hour=0, minute=0, second=0)).total_seconds()
        out += [f'<session num="{number}" starttime="{start:g}">', '<interaction num="1" starttime="0">',
                f"<query>{escape(shown[0]['query'])}</query>", "<results>"]
        out += [f'<result rank="{r["position"]}"><url>http://shop.example/{r["doc_id"]}</url><clueweb12id>{r["doc_id"]}'
                f"</clueweb12id><title>{escape(r['title'])}</title><snippet>...</snippet></result>" for r in shown]
        out += ["</results>", "<clicked>"]
        out += [f'<click num="1" starttime="5" endtime="9"><rank>{r["position"]}</rank></click>' for r in shown if r["clicked"]]
        out += ["</clicked>", "</interaction>", "</session>"]
    return "\n".join([*out, "</sessiontrack2013>", ""])


def csv_text(header: tuple[str, ...], rows: list[dict]) -> str:
    """``rows`` as CSV with ``header``."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_landing(store: Path) -> dict[str, int]:
    """Write the three days under ``store``'s ``landing/``; the click rows written per day (ISO date -> rows)."""
    files = {}
    day1, day2, day3 = (searches(day) for day in DAYS)
    files[f"landing/clicks/dt={DAYS[0]}/part-0.jsonl"] = "".join(json.dumps(r) + "\n" for r in day1)
    files[f"landing/clicks/dt={DAYS[1]}/part-0.csv"] = csv_text(FIELDS, day2)
    files[f"landing/clicks/dt={DAYS[2]}/sessions.xml"] = trec_xml(day3)
    brands = ("Acme", "Bolt", "Crest", "Dune")
    snapshot = [{"product_id": pid, "title": title, "brand": brands[int(pid[1:]) % 4]}
                for pid, title in titles_on(DAYS[0]).items()]
    files[f"landing/catalog/dt={DAYS[0]}/snapshot.csv"] = csv_text(("product_id", "title", "brand"), snapshot)
    delta = [{"product_id": LAUNCHED, "title": titles_on(DAYS[1])[LAUNCHED], "op": "upsert"},
             {"product_id": RETITLED, "title": titles_on(DAYS[1])[RETITLED], "op": ""}]
    files[f"landing/catalog/dt={DAYS[1]}/delta.csv"] = csv_text(("product_id", "title", "op"), delta)
    for path, text in files.items():
        (store / path).parent.mkdir(parents=True, exist_ok=True)
        (store / path).write_text(text, encoding="utf-8")
    return {day.isoformat(): len(rows) for day, rows in zip(DAYS, (day1, day2, day3))}
