"""`whatsapp-bot kb`: the knowledge base's documents (add, list, show, remove) and a search
that shows what a message would get."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from bot.ops.dev_evals import run_dev_eval

if TYPE_CHECKING:
    from bot.knowledge.reference import Reference
    from bot.services import Services


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def cmd_kb(services: Services, args: argparse.Namespace) -> int:
    """Run one `kb` action; a refused document exits 2 with the reason."""
    from bot.knowledge.library import KnowledgeError

    try:
        return int(ACTIONS[args.action](services, args))
    except KnowledgeError as err:
        print(err)
        return 2


def kb_add(services: Services, args: argparse.Namespace) -> int:
    """Add files or folders, or websites (a page, a sitemap or a site's root); each line says
    what happened."""
    urls = [p for p in args.paths if p.lower().startswith(("http://", "https://"))]
    if urls:
        if len(urls) != len(args.paths):
            print("give either files and folders, or web addresses, not both")
            return 2
        reports = [services.sites.add(url, language=args.language) for url in urls]
        print_syncs(reports, args.json)
        schedule_site_sync(services)
        return 1 if any(not r.site.pages for r in reports) else 0
    results = services.library.add_paths([Path(p) for p in args.paths], title=args.title, language=args.language)
    if args.json:
        print(json.dumps([r.to_public() for r in results], indent=2, ensure_ascii=False))
        return 0
    for result in results:
        doc = result.doc
        print(f"{result.status:9} {doc.id}  {doc.title!r}  {doc.kind}, {doc.chunks} chunk(s), {doc.bytes:,} bytes"
              + (f", {doc.language}" if doc.language else ""))
    if not results:
        print("no readable files (.md, .txt, .html, .pdf) found")
    return 0


def print_syncs(reports: list[Any], as_json: bool) -> None:
    """Print what each site's sync did, and its errors (or JSON)."""
    if as_json:
        print(json.dumps([r.to_public() for r in reports], indent=2, ensure_ascii=False))
        return
    for report in reports:
        site = report.site
        print(f"site {site.id}  {site.url}  ({site.mode}): {len(site.pages)} page(s); {report.added} added, "
              f"{report.changed} changed, {report.unchanged} unchanged, {report.removed} removed, "
              f"{report.failed} failed")
        for error in report.errors[:20]:
            print(f"  ! {error}")


def schedule_site_sync(services: Services) -> None:
    """Make sure the periodic sync is scheduled (KB_SYNC_INTERVAL; docs/knowledge.md)."""
    from bot.jobs.sites import schedule_sync

    assert services.sites is not None
    schedule_sync(services.jobs.connection, services.sites.store, services.settings.KB_SYNC_INTERVAL)


def kb_sync(services: Services, args: argparse.Namespace) -> int:
    """Sync every site now (or one), with conditional GETs: only changed pages cost anything."""
    sites = services.sites.sites()
    if args.site:
        sites = [s for s in sites if s.id == args.site]
        if not sites:
            print(f"no site {args.site!r} (see `kb sites`)")
            return 1
    if not sites:
        print("no websites in the knowledge base (add one: kb add https://…)")
        return 0
    print_syncs([services.sites.sync(site) for site in sites], args.json)
    return 0


def kb_sites(services: Services, args: argparse.Namespace) -> int:
    """List the websites, or remove one with every document its pages became."""
    if args.remove:
        if not services.sites.remove(args.remove):
            print(f"no site {args.remove!r} (see `kb sites`)")
            return 1
        print(f"removed site {args.remove} and its pages' documents")
        return 0
    sites = [s.to_public() for s in services.sites.sites()]
    if args.json:
        print(json.dumps(sites, indent=2, ensure_ascii=False))
        return 0
    if not sites:
        print("no websites in the knowledge base (add one: kb add https://…)")
    for site in sites:
        synced = _when(site["synced_at"]) if site["synced_at"] else "never"
        print(f"{site['id']:20} {site['url']}  {site['mode']}, {site['pages']} page(s), synced {synced}"
              + (f", {len(site['errors'])} error(s)" if site["errors"] else ""))
        for error in site["errors"][:5]:
            print(f"  ! {error}")
    return 0


def kb_reembed(services: Services, args: argparse.Namespace) -> int:
    """Embed again the documents whose vectors came from another model (or none)."""
    counts = services.library.reembed(force=args.all)
    model = services.settings.EMBEDDING_MODEL
    print(f"re-embedded {counts['reembedded']} document(s) with {model}; {counts['current']} already were")
    return 0


def kb_list(services: Services, args: argparse.Namespace) -> int:
    """List the documents, with the version and totals."""
    docs = services.library.documents()
    totals = services.knowledge.totals()
    if args.json:
        print(json.dumps({**totals, "documents": [d.to_public() for d in docs]}, indent=2, ensure_ascii=False))
        return 0
    print(f"knowledge base: version {totals['version']}, {len(docs)} document(s), {totals['chunks']:,} chunk(s), "
          f"{totals['bytes']:,} bytes")
    for doc in docs:
        print(f"  {doc.id:24} {doc.title[:40]!r:44} {doc.kind:8} {doc.chunks:5} chunks  {doc.language or '-':3} "
              f"updated {_when(doc.updated_at)}  ({doc.source or 'uploaded'})")
    return 0


def kb_show(services: Services, args: argparse.Namespace) -> int:
    """Show one document and its chunks, as they are indexed."""
    doc, chunks = services.library.document(args.doc_id)
    if args.json:
        print(json.dumps({**doc.to_public(), "chunk_texts": [{"id": c.id, "tokens": c.tokens, "text": c.text}
                                                             for c in chunks]}, indent=2, ensure_ascii=False))
        return 0
    print(f"{doc.id}: {doc.title!r} ({doc.kind}, {doc.language or 'no language'}) from {doc.source or 'an upload'}")
    print(f"sha256 {doc.sha256[:16]}…, {doc.chunks} chunk(s), {doc.bytes:,} bytes, updated {_when(doc.updated_at)}"
          + (f", embedded with {doc.embedding_model}" if doc.embedding_model else ""))
    for chunk in chunks:
        print(f"\n--- {chunk.id} ({chunk.tokens} tokens)")
        print(chunk.text)
    return 0


def kb_remove(services: Services, args: argparse.Namespace) -> int:
    """Remove one document."""
    if not services.library.remove(args.doc_id):
        print(f"no document {args.doc_id!r} (see `kb list`)")
        return 1
    print(f"removed {args.doc_id}; every web process drops it at its next message")
    return 0


def kb_search(services: Services, args: argparse.Namespace) -> int:
    """Show what a message would get: the chunks injected, and every hit considered, with scores."""
    reference = services.retriever.preview(args.question)
    if args.json:
        print(json.dumps(reference.to_public(), indent=2, ensure_ascii=False))
        return 0
    print_reference(reference)
    return 0


def print_reference(reference: Reference) -> None:
    """Print a retrieval: what is injected, then why each hit was or was not."""
    report = reference.to_public()
    mode = "BM25 + embeddings" if reference.embedded else "BM25"
    gate = reference.gate
    if gate is not None and gate.gate_margin is not None:
        mode = "BM25 + both models"
        print(f"gate: {gate.decision} ({gate.reason})")
    if not reference.picked:
        why = gate.reason if gate is not None and gate.decision == "not_business" else \
            "no chunk reaches KNOWLEDGE_MIN_SCORE"
        print(f"nothing injected (version {reference.version}, {mode}): {why}")
    else:
        print(f"injected ({reference.tokens} tokens, version {reference.version}, {mode}):")
        for item in report["injected"]:
            print(f"  {item['chunk']} ({item['tokens']} tokens{', cut at a sentence' if item['cut'] else ''})")
            for line in item["text"].splitlines():
                print(f"    {line}")
    if report["considered"]:
        print("considered:")
    for item in report["considered"]:
        vector = f", cosine {item['similarity']}" if item["similarity"] is not None else ""
        vector += f", margin {item['margin']:+.3f}" if item["margin"] is not None else ""
        vector += f", gate cosine {item['gate_similarity']} margin {item['gate_margin']:+.3f}" \
            if item["gate_margin"] is not None else ""
        print(f"  {item['chunk']:28} score {item['score']:<6} bm25 rank {item['bm25_rank'] or '-'}{vector}  "
              f"-> {item['reason']}")


ACTIONS: dict[str, Callable[[Services, argparse.Namespace], int]] = {
    "add": kb_add, "list": kb_list, "show": kb_show, "remove": kb_remove, "search": kb_search, "reembed": kb_reembed,
    "sync": kb_sync, "sites": kb_sites,
}


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add the kb command to the CLI's subparsers."""
    del e164  # the knowledge base belongs to the business, not to a user
    kb = sub.add_parser("kb", help="the knowledge base: the business's documents the bot answers from")
    actions = kb.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add or replace documents (.md, .txt, .html, .pdf, or folders of them), "
                                         "or a website: a page, a sitemap.xml or the site's root")
    add.add_argument("paths", nargs="+", help="files or folders, or http(s) addresses")
    add.add_argument("--title", help="the document's title (one file only); default: its own, else the file name")
    add.add_argument("--language", help="for stemming: en, pt, es, fr, de… (default: KNOWLEDGE_LANGUAGE)")
    add.add_argument("--json", action="store_true", help="print JSON")
    listing = actions.add_parser("list", help="list the documents")
    listing.add_argument("--json", action="store_true", help="print JSON")
    show = actions.add_parser("show", help="show one document and its chunks")
    show.add_argument("doc_id")
    show.add_argument("--json", action="store_true", help="print JSON")
    remove = actions.add_parser("remove", help="remove one document")
    remove.add_argument("doc_id")
    reembed = actions.add_parser("reembed", help="embed again with EMBEDDING_MODEL (after changing it)")
    reembed.add_argument("--all", action="store_true", help="every document, not only those of another model")
    sync = actions.add_parser("sync", help="read the websites again now (only changed pages cost anything)")
    sync.add_argument("site", nargs="?", help="one site's id (default: every site)")
    sync.add_argument("--json", action="store_true", help="print JSON")
    sites = actions.add_parser("sites", help="list the websites, with their pages, last sync and errors")
    sites.add_argument("--remove", metavar="SITE", help="remove a site and every document its pages became")
    sites.add_argument("--json", action="store_true", help="print JSON")
    search = actions.add_parser("search", help="what a message would get, with scores")
    search.add_argument("question")
    search.add_argument("--json", action="store_true", help="print JSON")
    kb.set_defaults(func=cmd_kb)


def cmd_eval_knowledge(services: Services, args: argparse.Namespace) -> int:
    """`eval knowledge`: retrieval on the labelled sets, on a private Redis; exit 1 below target."""
    return run_dev_eval(services, args, "knowledge_evaluation", "run_knowledge_eval", "print_knowledge_report")
