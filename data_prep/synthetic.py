"""The embedded default data: a seeded synthetic multi-responder world, so the demo runs anywhere.

The generator mimics what matters in Reddit-style recommendation threads, calibrated to the two
statistics published for Reddit-v2 (Rank-GRPO's test split: about 5.35 responders per request, and
92-95% of a thread's union items named by one responder only;
docs/references.md#remark-the-method-remark-is-named-for):

- a catalog of titled, dated items in 8 genres (titles are made-up word combinations with genre-specific
  words), with Zipf-like popularity;
- requests that name a genre and one or two seed items (the ``seen`` titles), whose *latent* relevant
  set is that genre's other items (or a random subset of them: ``relevant_size``);
- ``n_x`` responders per request from a heavy-tailed count distribution (1 + negative binomial, mean
  ``mean_responders`` = 5.35, capped), each naming 1 + Poisson(0.3) items: a relevant item drawn with
  probability proportional to popularity ** 0.5, or, with probability ``offbeat_prob``, an *offbeat*
  pick (a personal favourite from anywhere in the catalog, uniformly).

With the defaults (96 items, ``offbeat_prob`` 0.65), worlds of 600 requests with seeds 0-4 have
5.2-5.5 responders per request and 92.2-93.0% single-mention union items (``single_mention_item_share``
of ``remark stats``). One responder's items are therefore a very noisy view of
what the request wants: the responder draw that ReMaRk marginalises out, as on Reddit. The price is a
harder task: with about 7 mentions per request, 93% single-mention items leave little mass on any one
item, so even the best list of 5 recalls only about a fifth of a responder's items.

Departure from real threads: the relevant set is a function of the genre named in the prompt, so the
best possible list is knowable from the prompt; on Reddit it is not. And the catalog is tiny (96 items,
8 genres x 12), so that a ~1M-parameter model learns it (titles *and* years) in a few hundred SFT steps.

Nothing here is read from disk and everything is a pure function of the arguments (numpy ``Generator``
seeded explicitly; no set or dict iteration decides an order). The titles are made up, so the tiny
model must learn the catalog from the SFT warm-up, as a real model learns real titles in pre-training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

GENRES: dict[str, list[str]] = {
    "science fiction": ["Star", "Orbit", "Signal", "Android", "Nebula", "Quantum", "Colony", "Void"],
    "horror": ["Shadow", "Crypt", "Hollow", "Whisper", "Bone", "Curse", "Night", "Fog"],
    "romantic comedy": ["Kiss", "Wedding", "Heart", "Date", "Sweet", "Summer", "Letter", "Bride"],
    "western": ["Dust", "Canyon", "Rider", "Outlaw", "Sheriff", "Frontier", "Gold", "Mesa"],
    "crime thriller": ["Heist", "Alibi", "Witness", "Cartel", "Ransom", "Motive", "Badge", "Vault"],
    "animated family": ["Bunny", "Dragon", "Balloon", "Puppy", "Castle", "Rainbow", "Toy", "Kite"],
    "war drama": ["Trench", "Battalion", "Harbor", "Medal", "Siege", "Convoy", "Flag", "Front"],
    "fantasy adventure": ["Quest", "Sword", "Crown", "Wizard", "Realm", "Rune", "Oracle", "Throne"],
}
NOUNS = ["River", "City", "Road", "Dawn", "Winter", "Garden", "Mirror", "Island", "Tower", "Storm"]
TEMPLATES = [
    "The {a} {n}",
    "{a} of the {n}",
    "{a} {b}",
    "Last {a}",
    "{n} {a}",
    "Return of the {a}",
    "{a} and {b}",
    "Beyond the {a} {n}",
]
REQUEST_TEMPLATES = [
    "I loved {seeds}. Looking for more {genre} movies like these, any ideas?",
    "Just watched {seeds} and want something similar. Best {genre} picks?",
    "Recommend me {genre} films in the spirit of {seeds}.",
]


@dataclass(frozen=True)
class SyntheticWorld:
    """A generated catalog and threads (one row per responder mention), ready for pooling.

    ``catalog`` columns: item_id, title, year, aliases, popularity, genre.
    ``threads`` columns: request_id, prompt (list of {role, content}), responder_id, title, year, seen
    (raw "Title (Year)" strings), split; plus ``relevant`` (the latent relevant item ids per request).
    """

    catalog: pl.DataFrame
    threads: pl.DataFrame
    relevant: pl.DataFrame
    meta: dict


def _catalog(rng: np.random.Generator, n_items: int) -> pl.DataFrame:
    genre_names = list(GENRES)
    genre_idx = np.arange(n_items) % len(genre_names)
    rng.shuffle(genre_idx)
    titles: list[str] = []
    seen: set[str] = set()
    for g in genre_idx:
        words = GENRES[genre_names[g]]
        # Retry until unique: titles are short word combinations, collisions are common for big catalogs.
        for attempt in range(100):
            a, b = rng.choice(words, size=2, replace=False)
            n = NOUNS[rng.integers(len(NOUNS))]
            title = TEMPLATES[rng.integers(len(TEMPLATES))].format(a=a, b=b, n=n)
            if attempt > 10:
                title = f"{title} {int(rng.integers(2, 9))}"  # a sequel number keeps it unique
            if title not in seen:
                break
        seen.add(title)
        titles.append(title)
    years = rng.integers(1960, 2024, size=n_items)
    # Zipf-like popularity within the whole catalog.
    ranks = rng.permutation(n_items) + 1
    popularity = 1.0 / ranks**0.8
    return pl.DataFrame(
        {
            "item_id": [f"{t} ({y})" for t, y in zip(titles, years, strict=True)],
            "title": titles,
            "year": years.astype(np.int32),
            "aliases": [[] for _ in range(n_items)],
            "popularity": popularity,
            "genre": [genre_names[g] for g in genre_idx],
        },
        schema_overrides={"aliases": pl.List(pl.String)},
    )


#: peak bytes per request of :func:`build_dataset`, and per request and catalog item (measured: 42 kB per
#: request with 96 items, 68 kB with 5000, for 20 000 and 60 000 requests)
BYTES_PER_REQUEST, BYTES_PER_REQUEST_ITEM = 50_000, 6


def synthetic_memory(n_requests: int, n_items: int) -> int:
    """Peak bytes of :func:`build_dataset`: ``n_requests x (BYTES_PER_REQUEST + n_items x
    BYTES_PER_REQUEST_ITEM)`` (the threads, the pooled tables and the grounding of every mention)."""
    return n_requests * (BYTES_PER_REQUEST + n_items * BYTES_PER_REQUEST_ITEM)


def generate_world(
    *,
    n_requests: int = 400,
    n_items: int = 96,
    relevant_size: tuple[int, int] | None = None,
    mean_responders: float = 5.35,
    max_responders: int = 40,
    mean_items_per_responder: float = 1.3,
    offbeat_prob: float = 0.65,
    popularity_power: float = 0.5,
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> SyntheticWorld:
    """Generate a seeded multi-responder world.

    Each request names a genre and 1-2 seed items of it (``seen``). Its latent relevant set is that
    genre's other items, or a random subset of them of a size drawn from ``relevant_size`` (min, max;
    capped by the genre's size). Responder counts:
    n_x = 1 + NegBin(r=1.5, mean=mean_responders - 1), capped at ``max_responders`` (heavy-tailed like
    Reddit threads: many requests with 1-3 answers, a few with dozens). Items per responder:
    1 + Poisson(mean_items_per_responder - 1). Each item is, with probability ``offbeat_prob``, an
    *offbeat* pick (a personal favourite: any unseen catalog item outside the relevant set, uniformly),
    else a relevant item drawn with probability proportional to popularity ** ``popularity_power``;
    a responder never names an item twice. Offbeat picks are what makes most union items single-mention
    in a small catalog, as on Reddit, and what makes one responder's items a noisy target.
    """
    if n_requests < 1 or n_items < 20:
        raise ValueError("generate_world needs n_requests >= 1 and n_items >= 20")
    if not all(0.0 <= f <= 1.0 for f in split_fractions) or not abs(sum(split_fractions) - 1.0) <= 1e-9:
        raise ValueError(f"split_fractions must be in [0, 1] and sum to 1, got {split_fractions}")
    if not 0.0 <= offbeat_prob < 1.0:
        raise ValueError(f"offbeat_prob must be in [0, 1), got {offbeat_prob}")
    if mean_responders < 1.0 or mean_items_per_responder < 1.0:
        raise ValueError("mean_responders and mean_items_per_responder must be >= 1")
    rng = np.random.default_rng(seed)
    catalog = _catalog(rng, n_items)
    genres = catalog["genre"].to_numpy()
    ids = catalog["item_id"].to_numpy()
    titles = catalog["title"].to_list()
    years = catalog["year"].to_list()
    pop = catalog["popularity"].to_numpy()
    genre_names = list(GENRES)

    # Negative binomial with mean m and shape r: p = r / (r + m).
    r_shape = 1.5
    extra_mean = mean_responders - 1.0
    if extra_mean > 0:
        extra = rng.negative_binomial(r_shape, r_shape / (r_shape + extra_mean), size=n_requests)
    else:
        extra = np.zeros(n_requests, dtype=np.int64)
    n_resp = np.minimum(1 + extra, max_responders)
    split_names = np.array(["train", "valid", "test"])
    splits = split_names[rng.choice(3, size=n_requests, p=list(split_fractions))]

    rows: dict[str, list] = {k: [] for k in ("request_id", "prompt", "responder_id", "title", "year", "seen")}
    rows["split"] = []
    relevant_rows: dict[str, list] = {"request_id": [], "relevant": []}
    all_items = np.arange(n_items)
    for x in range(n_requests):
        genre = genre_names[rng.integers(len(genre_names))]
        pool = np.flatnonzero(genres == genre)
        seed_items = rng.choice(pool, size=int(min(len(pool) - 1, rng.integers(1, 3))), replace=False)
        candidates = pool[~np.isin(pool, seed_items)]
        lo, hi = relevant_size if relevant_size is not None else (len(candidates), len(candidates))
        size = int(min(len(candidates), rng.integers(lo, hi + 1)))
        relevant = rng.choice(candidates, size=size, replace=False)
        offbeat = all_items[~np.isin(all_items, relevant) & ~np.isin(all_items, seed_items)]
        seeds_text = " and ".join(ids[i] for i in seed_items)
        text = REQUEST_TEMPLATES[rng.integers(len(REQUEST_TEMPLATES))].format(seeds=seeds_text, genre=genre)
        prompt = [{"role": "user", "content": text}]
        seen = [str(ids[i]) for i in seed_items]
        request_id = f"syn-{x:05d}"
        relevant_rows["request_id"].append(request_id)
        relevant_rows["relevant"].append([str(ids[i]) for i in relevant])
        weights = pop[relevant] ** popularity_power
        weights = weights / weights.sum()
        for r in range(int(n_resp[x])):
            m = 1 + int(rng.poisson(mean_items_per_responder - 1.0))
            named: list[int] = []
            for _ in range(m):
                if rng.random() < offbeat_prob:
                    i = int(offbeat[rng.integers(len(offbeat))])
                else:
                    i = int(relevant[rng.choice(len(relevant), p=weights)])
                if i not in named:
                    named.append(i)
            for i in named:
                rows["request_id"].append(request_id)
                rows["prompt"].append(prompt)
                rows["responder_id"].append(f"u{r}")
                rows["title"].append(titles[i])
                rows["year"].append(int(years[i]))
                rows["seen"].append(seen)
                rows["split"].append(str(splits[x]))
    threads = pl.DataFrame(
        rows,
        schema={
            "request_id": pl.String,
            "prompt": pl.List(pl.Struct({"role": pl.String, "content": pl.String})),
            "responder_id": pl.String,
            "title": pl.String,
            "year": pl.Int32,
            "seen": pl.List(pl.String),
            "split": pl.String,
        },
    )
    meta = {
        "source": "synthetic",
        "domain": "movie",
        "has_years": True,
        "instruction_included": False,
        "seed": seed,
        "n_requests": n_requests,
        "n_items": n_items,
        "relevant_size": list(relevant_size) if relevant_size is not None else None,
        "mean_responders": mean_responders,
        "max_responders": max_responders,
        "mean_items_per_responder": mean_items_per_responder,
        "offbeat_prob": offbeat_prob,
        "popularity_power": popularity_power,
        "split_fractions": list(split_fractions),
    }
    relevant_df = pl.DataFrame(
        relevant_rows, schema={"request_id": pl.String, "relevant": pl.List(pl.String)}
    )
    return SyntheticWorld(catalog=catalog, threads=threads, relevant=relevant_df, meta=meta)


def build_dataset(out_dir, *, grounding=None, force: bool = False, command=None, **world_kwargs):
    """Generate a world and write it as a prepared dataset directory (``remark prep``'s layout).

    ``grounding`` (a ``catalog.match.GroundingSettings``, default fuzzy) grounds the threads and is
    recorded in ``meta.json``; the threads name catalog titles verbatim, so every mode grounds them alike.
    ``force`` replaces an existing folder that is not an earlier dataset (``remark prep --force``).
    Returns the ``data_prep.dataset.PooledDataset`` that was written.
    """
    from catalog.match import GroundingSettings, Matcher
    from catalog.table import Catalog
    from data_prep.dataset import write_dataset
    from data_prep.pool import pool_threads
    from data_prep.schema import Threads

    grounding = grounding or GroundingSettings()
    world = generate_world(**world_kwargs)
    catalog = Catalog.from_frame(world.catalog)
    threads = Threads(world.threads, catalog, dict(world.meta))
    pooled = pool_threads(threads, Matcher(catalog, grounding))
    meta = {k: world.meta[k] for k in ("source", "domain", "has_years", "instruction_included")}
    meta["generator"] = {k: v for k, v in world.meta.items() if k not in meta}
    return write_dataset(out_dir, pooled, catalog, meta, grounding=grounding, force=force, command=command)
