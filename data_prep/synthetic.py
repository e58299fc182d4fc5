"""The embedded default data: a seeded synthetic multi-responder world, so the demo runs anywhere.

The generator mimics what matters in Reddit-style recommendation threads (design.md, references.md):

- a catalog of titled, dated items in a few genres, with Zipf-like popularity;
- requests that name a genre and one or two seed items (the ``seen`` titles), whose *latent* relevant
  set is a random subset of that genre's items;
- ``n_x`` responders per request from a heavy-tailed count distribution (1 + negative binomial, mean
  about 5.35 like Reddit-v2's test split, capped), each naming a few relevant items drawn by
  popularity, so that most union items are named by exactly one responder.

Nothing here is read from disk and everything is a pure function of the arguments (numpy ``Generator``
seeded explicitly). The titles are made-up word combinations, so the tiny demo model must learn the
catalog from the SFT warm-up, as a real model learns real titles in pre-training.
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


def generate_world(
    *,
    n_requests: int = 400,
    n_items: int = 480,
    relevant_size: tuple[int, int] = (20, 40),
    mean_responders: float = 5.35,
    max_responders: int = 40,
    mean_items_per_responder: float = 2.0,
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> SyntheticWorld:
    """Generate a seeded multi-responder world.

    Responder counts: n_x = 1 + NegBin(r=1.5, mean=mean_responders - 1), capped at ``max_responders``
    (heavy-tailed like Reddit threads: many requests with 1-3 answers, a few with dozens). Items per
    responder: 1 + Poisson(mean_items_per_responder - 1), drawn without replacement from the request's
    latent relevant set with probability proportional to sqrt(popularity).
    """
    if n_requests < 1 or n_items < 20:
        raise ValueError("generate_world needs n_requests >= 1 and n_items >= 20")
    if abs(sum(split_fractions) - 1.0) > 1e-9:
        raise ValueError(f"split_fractions must sum to 1, got {split_fractions}")
    rng = np.random.default_rng(seed)
    catalog = _catalog(rng, n_items)
    genres = catalog["genre"].to_numpy()
    ids = catalog["item_id"].to_numpy()
    pop = catalog["popularity"].to_numpy()
    genre_names = list(GENRES)

    # Negative binomial with mean m and shape r: p = r / (r + m).
    r_shape = 1.5
    extra_mean = mean_responders - 1.0
    n_resp = 1 + rng.negative_binomial(r_shape, r_shape / (r_shape + extra_mean), size=n_requests)
    n_resp = np.minimum(n_resp, max_responders)
    split_names = np.array(["train", "valid", "test"])
    splits = split_names[rng.choice(3, size=n_requests, p=list(split_fractions))]

    rows: dict[str, list] = {k: [] for k in ("request_id", "prompt", "responder_id", "title", "year", "seen")}
    rows["split"] = []
    relevant_rows: dict[str, list] = {"request_id": [], "relevant": []}
    for x in range(n_requests):
        genre = genre_names[rng.integers(len(genre_names))]
        pool = np.flatnonzero(genres == genre)
        size = int(min(len(pool), rng.integers(relevant_size[0], relevant_size[1] + 1)))
        relevant = rng.choice(pool, size=size, replace=False)
        seed_items = rng.choice(pool, size=int(rng.integers(1, 3)), replace=False)
        relevant = relevant[~np.isin(relevant, seed_items)]
        seeds_text = " and ".join(ids[i] for i in seed_items)
        text = REQUEST_TEMPLATES[rng.integers(len(REQUEST_TEMPLATES))].format(seeds=seeds_text, genre=genre)
        request_id = f"syn-{x:05d}"
        relevant_rows["request_id"].append(request_id)
        relevant_rows["relevant"].append([str(ids[i]) for i in relevant])
        weights = np.sqrt(pop[relevant])
        weights = weights / weights.sum()
        for r in range(int(n_resp[x])):
            m = int(min(len(relevant), 1 + rng.poisson(mean_items_per_responder - 1.0)))
            named = rng.choice(relevant, size=m, replace=False, p=weights)
            for i in named:
                rows["request_id"].append(request_id)
                rows["prompt"].append([{"role": "user", "content": text}])
                rows["responder_id"].append(f"u{r}")
                rows["title"].append(str(catalog["title"][int(i)]))
                rows["year"].append(int(catalog["year"][int(i)]))
                rows["seen"].append([str(ids[i]) for i in seed_items])
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
    }
    relevant_df = pl.DataFrame(
        relevant_rows, schema={"request_id": pl.String, "relevant": pl.List(pl.String)}
    )
    return SyntheticWorld(catalog=catalog, threads=threads, relevant=relevant_df, meta=meta)


def build_dataset(out_dir, *, match: str = "exact", **world_kwargs):
    """Generate a world and write it as a prepared dataset directory (``remark prep``'s layout).

    The synthetic threads name catalog titles verbatim, so ``exact`` grounding is lossless. Returns the
    ``data_prep.dataset.PooledDataset`` that was written.
    """
    from catalog.match import Matcher
    from catalog.table import Catalog
    from data_prep.dataset import write_dataset
    from data_prep.pool import pool_threads
    from data_prep.schema import Threads

    world = generate_world(**world_kwargs)
    catalog = Catalog.from_frame(world.catalog)
    threads = Threads(world.threads, catalog, dict(world.meta))
    pooled = pool_threads(threads, Matcher(catalog, mode=match))
    meta = {k: world.meta[k] for k in ("source", "domain", "has_years", "instruction_included")}
    meta["generator"] = {k: v for k, v in world.meta.items() if k not in meta}
    return write_dataset(out_dir, pooled, catalog, meta)
