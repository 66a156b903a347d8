"""``evaluate agreement``: pools, the replay users, the real metrics, rank statistics, the whole run and the CLI."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from recagent_gym.data.splits import popularity_bands, seen_items
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.prompts.item_scoring import OPTIONS
from recagent_gym.runs.config import load_config
from recagent_gym.runs.evaluation.agreement.evaluate import run_agreement
from recagent_gym.runs.evaluation.agreement.pools import PoolRetriever, build_pools, temporal_split
from recagent_gym.runs.evaluation.agreement.report import Report
from recagent_gym.runs.evaluation.agreement.run import REAL, PageScorer
from recagent_gym.runs.evaluation.agreement.stats import dose_response, oracle_bound, rank_agreement, split_half
from recagent_gym.runs.evaluation.subjects import Resources
from recagent_gym.users.protocol import Action, Context, Page
from recagent_gym.users.replay import ReplayUser
from tests._eval_fixtures import cli_exit_code, movielens_dir, tiny_ml  # noqa: F401


def _config(**evaluation: object):
    base = {"evaluation.embedder": "hashing", "evaluation.agreement_pool": 20, "evaluation.agreement_future": 4,
            "evaluation.agreement_pages": 2, "evaluation.agreement_min_history": 10, "evaluation.agreement_users": 8,
            "memory.implementation": "none", "social.enabled": "false",
            "user.llm_item_score": "yes_no"}  # fmt: skip  # the scripted LLM answers Yes/No options
    base.update({f"evaluation.{k}": v for k, v in evaluation.items()})
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.mark.parametrize("sampler", ["uniform", "popularity-matched"])
def test_pools_hold_the_future_among_unseen_negatives(tiny_ml, sampler):  # noqa: F811
    split = temporal_split(tiny_ml, 4, 10)
    users = sorted(split.held_out)[:6]
    pools = build_pools(tiny_ml, split, users, sampler=sampler, size=20, seed=3)
    bands = popularity_bands(split.train)
    for user in users:
        pool = pools[user]
        assert len(pool.candidates) == 20 == len(set(pool.candidates.tolist()))
        assert set(pool.future) == set(split.held_out[user]) <= set(pool.candidates.tolist())
        negatives = set(pool.candidates.tolist()) - set(pool.future)
        assert not negatives & set(seen_items(tiny_ml, user).tolist())  # never seen, before or after the cut
        if sampler == "popularity-matched":
            home = {int(bands[i]) for i in pool.future}
            near = sum(min(abs(int(bands[i]) - b) for b in home) <= 1 for i in negatives)
            assert near >= 0.8 * len(negatives)
    again = build_pools(tiny_ml, split, users, sampler=sampler, size=20, seed=3)
    assert all(np.array_equal(again[u].candidates, pools[u].candidates) for u in users)
    other = build_pools(tiny_ml, split, users, sampler=sampler, size=20, seed=4)
    assert any(not np.array_equal(other[u].candidates, pools[u].candidates) for u in users)
    retriever = PoolRetriever(pools, 20, tiny_ml.n_users)
    excluded = np.zeros(tiny_ml.n_items, dtype=bool)
    excluded[pools[users[0]].future[0]] = True
    assert pools[users[0]].future[0] not in retriever.retrieve(users[0], excluded, np.random.default_rng(0))


def test_replay_user_watches_its_earliest_future_item_on_the_page():
    user = ReplayUser({3: (11, 12, 13)}, {(3, 12): 4.5})
    rng = np.random.default_rng(0)
    watch = user.respond(Page((5, 13, 12, 7)), Context(3), rng)
    assert (watch.action, watch.item, watch.rating) == (Action.WATCH, 12, 4.5)
    assert user.respond(Page((5, 12)), Context(3, watched=(12,)), rng).action == Action.NEXT
    assert user.respond(Page((5, 7)), Context(3), rng).action == Action.NEXT
    assert user.respond(Page((11,)), Context(9), rng).action == Action.NEXT  # a user without a future


def test_page_scorer_session_ndcg_rewards_the_future_first():
    future = {0: (1, 2, 3, 4)}
    first = PageScorer([0], future, k=2, pages=3)
    last = PageScorer([0], future, k=2, pages=3)
    for page_first, page_last in (((1, 2), (8, 9)), ((3, 4), (7, 6)), ((8, 9), (1, 2))):
        first(0, {"page": page_first}, 1.0, False)
        last(0, {"page": page_last}, 0.0, False)
    hit_f, _, session_f, recall_f = first.per_user()
    hit_l, _, session_l, recall_l = last.per_user()
    assert session_f[0] == pytest.approx(1.0) and session_l[0] < 0.5
    assert recall_f[0] == pytest.approx(1.0) and recall_l[0] == pytest.approx(0.5)
    assert hit_f[0] == pytest.approx(2 / 3) and hit_l[0] == pytest.approx(1 / 3)
    assert [d[1] for d in first.dose] == [2, 2, 0]


def test_page_scorer_averages_the_user_models_watch_probability_where_it_reports_one():
    scorer = PageScorer([0, 1], {0: (1,), 1: (2,)}, k=2, pages=2)
    scorer(0, {"page": (1, 3), "extra": {"p_watch": 0.8}}, 1.0, False)
    scorer(0, {"page": (4, 5), "extra": {"p_watch": 0.2}}, 0.0, True)
    scorer(1, {"page": (2, 3), "extra": {"p_watch": 0.6}}, 1.0, True)
    assert scorer.expected_per_user() == pytest.approx([0.5, 0.6])
    scorer(1, {"page": (4, 5), "extra": {}}, 0.0, True)  # a page without one: no mean for anyone
    assert scorer.expected_per_user() is None
    assert PageScorer([0], {0: (1,)}, k=2, pages=1).expected_per_user() is None  # no pages at all


def test_recent_popularity_counts_only_the_users_window(tiny_ml):  # noqa: F811
    from recagent_gym.recommenders.history_scorers import RecentPopularity

    inter = tiny_ml.interactions
    days = 0.1  # 2.4 hours: the fixture rates an item an hour
    recent = RecentPopularity(tiny_ml, days=days)
    before = after = 0
    for user in inter.groupby("user_id")["timestamp"].max().sort_values().index[:5]:  # the earliest users
        last = inter.loc[inter["user_id"] == user, "timestamp"].max()
        window = inter[(inter["timestamp"] >= last - days * 86_400) & (inter["timestamp"] <= last)]
        assert np.array_equal(recent.counts(user), np.bincount(window["item_id"], minlength=tiny_ml.n_items))
        before += int((inter["timestamp"] < last - days * 86_400).sum())  # ratings too early to count
        after += int((inter["timestamp"] > last).sum())  # ratings after the user's time, never read
    assert before > 0 and after > 0 and len(window) > 0
    assert not recent.counts(10**6).any()  # a user without history


def test_run_arms_shows_every_page_to_on_page(tiny_ml):  # noqa: F811
    from recagent_gym.runs.evaluation.agreement.run import run_arms
    from recagent_gym.runs.evaluation.agreement.zoo import Zoo
    from recagent_gym.runs.make_env import candidates_env

    config = _config()
    split = temporal_split(tiny_ml, 4, 10)
    users = np.array(sorted(split.held_out)[:6], dtype=np.int64)
    future = {int(u): tuple(dict.fromkeys(split.held_out[int(u)])) for u in users}
    pools = build_pools(tiny_ml, split, users, sampler="uniform", size=20, seed=0)
    retriever = PoolRetriever(pools, 20, split.train.n_users)

    def build():
        return candidates_env(split.train, ReplayUser(future), 5, 2, False, config, n_candidates=20, users=users,
                              retriever=retriever)  # fmt: skip

    seen: list[tuple[str, str, int, bool]] = []
    zoo = Zoo(["random", "oracle"], split.train, future, seed=0)

    def on_page(model: str, rec: str, k: int, info: dict, reward: float) -> None:
        seen.append((model, rec, k, reward > 0))

    arms, _ = run_arms({REAL: build}, zoo, users, future, sampler="uniform", seed=0, k=5, pages=2, progress=False,
                       on_page=on_page)  # fmt: skip
    for arm in arms:
        pages = [(k, hit) for model, rec, k, hit in seen if (model, rec) == (REAL, arm.recommender)]
        assert len(pages) == 2 * len(users)
        per_user = [np.mean([hit for k, hit in pages if k == index]) for index in range(len(users))]
        assert np.allclose(per_user, arm.hit)


def test_rank_agreement_and_dose_response():
    rng = np.random.default_rng(0)
    real = {f"r{k}": k + rng.normal(0, 0.1, 50) for k in range(6)}
    same = {name: 2 * v + 1 for name, v in real.items()}
    reversed_ = {name: -v for name, v in real.items()}
    agree = rank_agreement(real, same, n_boot=200)
    assert agree.tau == pytest.approx(1.0) and agree.tau_low > 0.9 and agree.n_recommenders == 6
    assert rank_agreement(real, reversed_, n_boot=200).tau == pytest.approx(-1.0)
    users = np.repeat(np.arange(40), 5)
    dose = rng.integers(0, 3, size=len(users))
    rows = np.column_stack([users, dose, 0.5 * dose + rng.normal(0, 0.1, len(users))])
    d = dose_response(rows, 40, n_boot=200)
    assert d.low < 0.5 < d.high and d.low > 0.3
    flat = dose_response(np.column_stack([users, dose, rng.normal(0, 0.1, len(users))]), 40, n_boot=200)
    assert flat.low < 0 < flat.high


def test_oracle_bound_counts_the_recommenders_a_user_model_ranks_at_or_above_the_future_oracle():
    real = {"oracle": 1.0, "a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5, "f": 0.4, "anti-oracle": 0.0}
    same = dict(real)
    assert oracle_bound(real, same).above == () and oracle_bound(real, same).tau_max == pytest.approx(1.0)
    sim = {**real, "oracle": 0.65}  # below a, b and c (and tied with none)
    bound = oracle_bound(real, sim)
    assert bound.above == ("a", "b", "c") and bound.tau_max == pytest.approx(1 - 6 / 28)
    # the bound holds: no ranking with the oracle there does better
    assert kendalltau(list(real.values()), list(sim.values())).statistic <= bound.tau_max + 1e-12
    tie = oracle_bound(real, {**real, "oracle": 0.8})  # tied with b: a tied pair costs half a discordant one
    assert tie.above == ("a",) and tie.tied == ("b",) and tie.tau_max == pytest.approx(25 / (28 * 27) ** 0.5)
    # reached: every other pair concordant, so the cap is tau-b itself
    assert kendalltau(list(real.values()), [{**real, "oracle": 0.8}[k] for k in real]).statistic == pytest.approx(
        tie.tau_max
    )
    assert oracle_bound({**real, "a": 1.0}, sim) is None  # the real ranking does not put the oracle first alone
    assert oracle_bound({k: v for k, v in real.items() if k != "oracle"}, sim) is None


def test_split_half_measures_how_well_the_real_ranking_reproduces_on_other_users():
    rng = np.random.default_rng(1)
    clear = {f"r{k}": k + rng.normal(0, 0.1, 60) for k in range(6)}  # far apart: every half ranks them alike
    half = split_half(clear, n_splits=200)
    assert half.tau == pytest.approx(1.0) and half.tau_low == pytest.approx(1.0) and half.n_users == 30
    tied = {f"r{k}": rng.normal(0, 1.0, 60) for k in range(6)}  # no real order: halves disagree
    noise = split_half(tied, n_splits=200)
    assert noise.tau_low < 0 < noise.tau_high and noise.tau < half.tau_low - 0.5
    assert split_half(clear, n_splits=200, seed=3) == split_half(clear, n_splits=200, seed=3)


def _resources(dataset, config):
    return Resources(dataset, config, config.evaluation, llm=ScriptedLLM(default="4 | A good film."),
                     base_embedder=HashingEmbedder(),
                     progress=False)  # fmt: skip


@pytest.mark.slow
def test_run_agreement_end_to_end(tiny_ml, tmp_path):  # noqa: F811
    config = _config(agreement_user_models="[recsim,embedding,llm,distilled]",
                     agreement_recommenders="[random,popularity,quality,itemknn,mf,oracle,anti-oracle]")  # fmt: skip
    run = run_agreement(config, tiny_ml, out=tmp_path, resources=_resources(tiny_ml, config), progress=False)
    assert run.user_models == [REAL, "recsim", "embedding", "llm"]  # no distilled model fits this dataset
    assert any("distilled users left out" in note for note in run.notes)
    assert len(set(run.users.tolist())) == len(run.users) == 8
    for sampler in ("uniform", "popularity-matched"):
        oracle, anti = run.arm(sampler, REAL, "oracle"), run.arm(sampler, REAL, "anti-oracle")
        # the oracle shows one real future item on every page (4 future items, 2 pages): the replayed real users
        # watch on every page; they never see one of the anti-oracle's
        assert np.all(oracle.hit == 1.0) and oracle.watches == 2.0 and np.all(oracle.returns > 0.0)
        assert np.all(anti.hit == 0.0) and np.all(anti.session_ndcg == 0.0) and np.all(anti.returns == 0.0)
        assert np.all(oracle.recall == 0.5)  # two of the four future items were shown, one per page
        random_hit = run.arm(sampler, REAL, "random").hit.mean()
        assert 0.0 < random_hit < 1.0
    report = Report(run, n_boot=100)
    paths = report.write(tmp_path)
    text = paths["markdown"].read_text()
    assert "Kendall tau" in text and "What this shows:" in text and "8 held-out users" in text
    with paths["csv"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 4 * 7  # samplers x (real + 3 models) x recommenders
    assert {r["user_model"] for r in rows} == {REAL, "recsim", "embedding", "llm"}
    # the response to real items: the replayed real users watch exactly on the pages that show one
    real_random = [r for r in rows if r["user_model"] == REAL and r["recommender"] == "random"]
    assert all(float(r["reward_no_real"]) == 0.0 and float(r["reward_with_real"]) >= 1.0 for r in real_random)
    oracle_rows = [r for r in rows if r["recommender"] == "oracle"]
    assert all(int(r["pages_no_real"]) == 0 and r["reward_no_real"] == "" for r in oracle_rows)
    assert "## Response to real items, per recommender" in text and "| uniform | anti-oracle |" in text
    with paths["rank_csv"].open() as handle:
        ranks = list(csv.DictReader(handle))
    assert len(ranks) == 2 * (4 + 1) and all(-1.0 <= float(r["kendall_tau"]) <= 1.0 for r in ranks)
    assert sum(r["user_model"] == "real, split halves" for r in ranks) == 2 and "real, split halves (4 + 4" in text
    # over the recommenders that read no real future (the oracles left out: 5 of 7), and where the oracle ranks
    real_means = {(r["sampler"], r["recommender"]): float(r["hit"]) for r in rows if r["user_model"] == REAL}
    first_alone, untied = set(), set()
    for sampler in ("uniform", "popularity-matched"):
        means = [v for (s, name), v in real_means.items() if s == sampler and name != "oracle"]
        if max(means) < real_means[(sampler, "oracle")]:
            first_alone.add(sampler)
        if len(set(means)) == len(means):
            untied.add(sampler)
    headline = [r for r in ranks if r["user_model"] in {"recsim", "embedding", "llm"}]
    assert all(-1.0 <= float(r["tau_without_oracles"]) <= 1.0 for r in headline)
    assert "tau without the oracles" in text and "(5) |" in text and "at or above the future oracle" in text
    for r in headline:  # the cap is reported where the real ranking puts the oracle first alone
        assert (r["tau_max_given_oracle"] != "") == (r["sampler"] in first_alone)
        if r["sampler"] in untied:  # and holds for tau-b where the real means have no other ties
            assert float(r["kendall_tau"]) <= float(r["tau_max_given_oracle"]) + 1e-9
    # the LLM agents report their watch probability, the RecSim-style and embedding users and the replay do not
    expected = {r["user_model"] for r in ranks if r["user_model"].endswith(", expected watch per page")}
    assert expected == {"llm, expected watch per page"} and "| uniform | llm, expected watch per page |" in text
    llm_rows = [r for r in rows if r["user_model"] == "llm"]
    assert all(0.0 <= float(r["expected_watch"]) <= 1.0 for r in llm_rows)
    assert all(r["expected_watch"] == "" for r in rows if r["user_model"] != "llm")
    assert paths["plot"].stat().st_size > 10_000


@pytest.mark.slow
def test_agreement_is_deterministic(tiny_ml, tmp_path):  # noqa: F811
    config = _config(agreement_user_models="[recsim,embedding]", agreement_recommenders="[random,popularity,mf]",
                     negatives="uniform")  # fmt: skip
    runs = [run_agreement(config, tiny_ml, out=tmp_path, resources=_resources(tiny_ml, config), progress=False)
            for _ in range(2)]  # fmt: skip
    for a, b in zip(runs[0].arms, runs[1].arms, strict=True):
        assert np.array_equal(a.returns, b.returns) and np.array_equal(a.hit, b.hit)


@pytest.mark.slow
def test_simulated_users_play_several_sessions_the_real_replay_one(tiny_ml, tmp_path):  # noqa: F811
    runs = {}
    for sessions in (1, 3):
        config = _config(agreement_user_models="[recsim]", agreement_recommenders="[random,popularity,oracle]",
                         negatives="uniform", agreement_sessions=sessions)  # fmt: skip
        runs[sessions] = run_agreement(config, tiny_ml, out=tmp_path / str(sessions),
                                       resources=_resources(tiny_ml, config), progress=False)  # fmt: skip
    for recommender in ("random", "popularity", "oracle"):
        one, three = (runs[n].arm("uniform", REAL, recommender) for n in (1, 3))
        assert np.array_equal(one.returns, three.returns) and np.array_equal(one.hit, three.hit)
        sim_one, sim_three = (runs[n].arm("uniform", "recsim", recommender) for n in (1, 3))
        # three sessions' doses: three times the pages (at most; a RecSim user may leave early)
        assert len(sim_one.dose) < len(sim_three.dose) <= 3 * 2 * len(runs[1].users)
        # random draws its pages, and popularity breaks its ties with a seeded random key per item (the retrieval
        # order never decides): their later users' pages depend on how many sessions came before
        assert np.array_equal(sim_one.recall, sim_three.recall) or recommender in ("random", "popularity")
    one, three = (np.concatenate([runs[n].arm("uniform", "recsim", r).returns for r in ("popularity", "oracle")])
                  for n in (1, 3))  # fmt: skip
    assert not np.array_equal(one, three)  # the mean of three sessions, not the first alone
    assert "the mean of 3 sessions per user" in Report(runs[3], n_boot=50).markdown()


@pytest.mark.slow
def test_simulated_users_see_every_page_unless_their_leaving_is_asked_for(tiny_ml, tmp_path):  # noqa: F811
    pages = {}
    for full in (True, False):
        config = _config(agreement_user_models="[embedding]", agreement_recommenders="[random,anti-oracle]",
                         negatives="uniform", agreement_pages=4, agreement_full_sessions=str(full).lower())  # fmt: skip
        config.user.patience = 1.0  # the first page without a watch ends a session (with leaving)
        resources = _resources(tiny_ml, config)
        run = run_agreement(config, tiny_ml, out=tmp_path / str(full), resources=resources, progress=False)
        assert resources.config.user.full_sessions is False  # the caller's resources keep their own config
        assert run.settings["full_sessions"] is full
        pages[full] = run.arm("uniform", "embedding", "anti-oracle").pages
        assert run.arm("uniform", REAL, "anti-oracle").pages == 4.0  # the replay always sees every page
        assert ("every session shows all its pages" in Report(run, n_boot=20).markdown()) is full
    assert pages[True] == 4.0 and pages[False] < 4.0


@pytest.mark.slow
def test_swapped_rows_read_another_users_history(tiny_ml, tmp_path):  # noqa: F811
    config = _config(agreement_user_models="[recsim]", agreement_recommenders="[random,itemknn,mf]",
                     agreement_swapped="[itemknn,mf]", negatives="uniform", agreement_users=12)  # fmt: skip
    run = run_agreement(config, tiny_ml, out=tmp_path, resources=_resources(tiny_ml, config), progress=False)
    assert run.recommenders == ["random", "itemknn", "mf", "itemknn~swapped", "mf~swapped"]
    for name in ("itemknn", "mf"):
        own, other = run.arm("uniform", REAL, name), run.arm("uniform", REAL, name + "~swapped")
        # same users, pools and sessions; only whose history the recommender reads differs: the pages change
        assert len(own.hit) == len(other.hit) == 12 and not np.array_equal(own.session_ndcg, other.session_ndcg)
        assert run.arm("uniform", "recsim", name + "~swapped").returns.shape == (12,)
    text = Report(run, n_boot=50).markdown()
    assert "## Personalisation" in text and "| uniform | itemknn |" in text and "| uniform | mf |" in text
    with pytest.raises(ValueError, match=r"agreement_swapped.*popularity"):
        bad = _config(agreement_user_models="[recsim]", agreement_recommenders="[random,popularity]",
                      agreement_swapped="[popularity]", negatives="uniform")  # fmt: skip
        run_agreement(bad, tiny_ml, out=tmp_path, resources=_resources(tiny_ml, bad), progress=False)


@pytest.mark.slow
def test_agreement_cli(movielens_dir, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "agreement"
    cmd = [sys.executable, "-m", "recagent_gym.runs.cli", "evaluate", "agreement", "--dataset", str(movielens_dir),
           "--users", "6", "--user-model", "recsim", "--recommender", "random", "--recommender", "oracle",
           "--recommender", "popularity", "--negatives", "uniform", "--sessions", "2", "--out", str(out),
           "--no-progress",
           "--set", "evaluation.embedder=hashing", "--set", "evaluation.agreement_pool=20",
           "--set", "evaluation.agreement_future=4"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={"HF_HUB_OFFLINE": "1",
                          **__import__("os").environ})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "What this shows:" in done.stdout and "the mean of 2 sessions per user" in done.stdout
    assert "agreement_sessions: 2" in (out / "config.yaml").read_text()
    assert {p.name for p in out.iterdir()} >= {"agreement.md", "agreement.csv", "rank_agreement.csv",
                                               "agreement.png", "config.yaml"}  # fmt: skip
    capsys.readouterr()
    assert cli_exit_code([*cmd[3:-6], "--policy", "nameonly"]) != 0  # refused before any work: in process
    assert "NAME=PATH" in capsys.readouterr().err
    # --fit wants a users fit-agreement file: a calibrate file (the shipped one) is refused before any work
    from recagent_gym.users.prior_default import BUNDLED_CALIBRATION

    assert cli_exit_code([*cmd[3:-6], "--fit", f"cal={BUNDLED_CALIBRATION}"]) != 0
    assert "not a 'users fit-agreement' file" in capsys.readouterr().err


ML_100K_GENRES = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
                  "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller",
                  "War", "Western")  # fmt: skip


def _as_ml_100k(latest: Path, folder: Path) -> Path:
    """The synthetic MovieLens-latest folder rewritten in MovieLens-100K's layout (u.data, u.item, u.user)."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    movies = pd.read_csv(latest / "movies.csv")
    ratings = pd.read_csv(latest / "ratings.csv")
    items = []
    for row in movies.itertuples():
        flags = ["1" if g in row.genres.split("|") else "0" for g in ML_100K_GENRES]
        items.append(f"{row.movieId}|{row.title}|01-Jan-1995||http://x|" + "|".join(flags))
    (folder / "u.item").write_text("\n".join(items) + "\n", encoding="latin-1")
    users = sorted(ratings["userId"].unique())
    (folder / "u.user").write_text("".join(f"{u}|30|M|other|00000\n" for u in users), encoding="latin-1")
    lines = [f"{r.userId}\t{r.movieId}\t{round(r.rating)}\t{r.timestamp}" for r in ratings.itertuples()]
    (folder / "u.data").write_text("\n".join(lines) + "\n", encoding="latin-1")
    return folder


def test_agreement_on_a_movielens_100k_folder(movielens_dir, tmp_path):  # noqa: F811
    from recagent_gym.data.load import load_dataset

    dataset = load_dataset(str(_as_ml_100k(movielens_dir, tmp_path / "ml-100k")))
    config = _config(agreement_user_models="[recsim]", agreement_recommenders="[random,popularity,oracle]",
                     negatives="uniform")  # fmt: skip
    run = run_agreement(config, dataset, out=tmp_path, resources=_resources(dataset, config), progress=False)
    means = {r: run.arm("uniform", REAL, r).hit.mean() for r in run.recommenders}
    assert means["oracle"] == 1.0 and means["random"] < means["oracle"]
    assert len(run.users) == 8 and run.user_models == [REAL, "recsim"]


@pytest.mark.slow
def test_llm_users_score_every_pool_item_once_before_the_sessions(tiny_ml, tmp_path):  # noqa: F811
    """With the score cache, each user's pools (both samplers) are scored in one call in the sessions' own
    context (the prefetch is seeded by the user id): the sessions of every recommender and sampler then never ask
    the LLM again (searching is off here: search results come from the whole catalogue), nothing is invalidated."""
    config = _config(agreement_user_models="[llm]", agreement_recommenders="[random,popularity,anti-oracle]")
    config.user.score_cache = True
    config.user.search_interest_probability = config.user.search_heard_probability = 0.0
    resources = _resources(tiny_ml, config)
    run = run_agreement(config, tiny_ml, out=tmp_path, resources=resources, progress=False)
    scoring = [h for h in resources.llm.history if h["kind"] == "choose" and tuple(h["options"]) == OPTIONS]
    assert scoring and {h["seed"] for h in scoring} <= {int(u) for u in run.users}
    stats = next(note for note in run.notes if "score cache" in note)
    assert "'invalidations': 0" in stats and "'hits': 0" not in stats


def test_the_llm_ablations_reuse_the_llm_rows_scores(tiny_ml, tmp_path):  # noqa: F811
    """``llm-only`` and ``llm-embedding-term`` are the ``llm`` row's agents with one weight of the item score at 0:
    they add rows but no LLM scoring call, and the embedding term alone differs from the LLM alone."""
    models = "[llm,llm-only,llm-embedding-term]"
    config = _config(agreement_user_models=models, agreement_recommenders="[random,popularity]", negatives="uniform")
    config.user.score_cache = True
    config.user.search_interest_probability = config.user.search_heard_probability = 0.0
    resources = _resources(tiny_ml, config)
    run = run_agreement(config, tiny_ml, out=tmp_path, resources=resources, progress=False)
    assert run.user_models == [REAL, "llm", "llm-only", "llm-embedding-term"]
    alone = _config(agreement_user_models="[llm]", agreement_recommenders="[random,popularity]", negatives="uniform")
    alone.user.score_cache = True
    alone.user.search_interest_probability = alone.user.search_heard_probability = 0.0
    single = _resources(tiny_ml, alone)
    run_agreement(alone, tiny_ml, out=tmp_path / "alone", resources=single, progress=False)
    scoring = [h for h in resources.llm.history if h["kind"] == "choose" and tuple(h["options"]) == OPTIONS]
    scoring_alone = [h for h in single.llm.history if h["kind"] == "choose" and tuple(h["options"]) == OPTIONS]
    assert len(scoring) == len(scoring_alone)
    only, term = run.arm("uniform", "llm-only", "random"), run.arm("uniform", "llm-embedding-term", "random")
    assert not np.array_equal(only.returns, term.returns)


@pytest.mark.slow
def test_llm_prior_parts_row_weighs_each_part_of_the_agents_score(tiny_ml, tmp_path):  # noqa: F811
    """``llm+prior-parts`` runs the agents with the weights file's ``parts`` fit: with the LLM's score at 0, the
    embedding term at 1 and no prior feature its sessions are the ``llm-embedding-term`` row's, from the same scores."""
    import json

    path = tmp_path / "prior.json"
    parts = {"parts": {"weights": {"llm_score": 0.0, "embedding": 1.0}}}
    path.write_text(json.dumps({"both": {"llm": 1.0, "popularity": 3.0}, "prior_only": {"popularity": 1.0},
                                "users_raw": [], "window_days": 180.0, "parts_fits": parts}))  # fmt: skip
    models = "[llm-embedding-term,llm+prior,llm+prior-parts]"
    config = _config(agreement_user_models=models, agreement_recommenders="[random,popularity]", negatives="uniform")
    config.user.prior_weights = str(path)
    config.user.score_cache = True
    config.user.search_interest_probability = config.user.search_heard_probability = 0.0
    run = run_agreement(config, tiny_ml, out=tmp_path / "run", resources=_resources(tiny_ml, config), progress=False)
    for recommender in ("random", "popularity"):
        parts = run.arm("uniform", "llm+prior-parts", recommender).returns
        assert np.array_equal(parts, run.arm("uniform", "llm-embedding-term", recommender).returns)
    assert set(run.prior["weights"]) == {"both", "parts"}
    assert "fit `parts`): llm_score +0.000, embedding +1.000" in Report(run, n_boot=100).markdown()


@pytest.mark.slow
def test_sim2real_uses_the_configured_negatives(tiny_ml, tmp_path):  # noqa: F811
    from recagent_gym.runs.evaluation.agreement.sim2real import real_metrics

    users = sorted(temporal_split(tiny_ml, 4, 10).held_out)[:10]
    hits = {}
    for sampler in ("uniform", "popularity-matched"):
        config = _config(sim2real_negatives=sampler)
        config.train.n_candidates = 20
        real = real_metrics(config, tiny_ml, users, baselines={"random": "random", "mf": "mf"}, swapped=["mf"],
                            out=tmp_path / sampler)  # fmt: skip
        assert set(real) == {"random", "mf"} and real["random"].swapped_drop is None
        assert real["mf"].swapped_drop is not None and np.isfinite(real["mf"].swapped_drop.mean)
        hits[sampler] = (real["random"].per_user, real["mf"].per_user)
    # other pools: the pages, and so the hits, differ
    assert any(not np.array_equal(a, b) for a, b in zip(hits["uniform"], hits["popularity-matched"], strict=True))
