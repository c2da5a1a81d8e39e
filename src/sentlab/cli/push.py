"""``sentlab push MODEL --repo-id ORG/NAME [--dry-run]``: an exported model to the Hugging Face Hub
(:mod:`sentlab.hub.push`)."""

from __future__ import annotations

from ..hub.push import check_repo_id, dry_run, export_folder, push


def _cmd_push(args) -> int:
    repo_id = check_repo_id(args.repo_id)
    folder = export_folder(args.model, args.exports)
    if args.dry_run:
        print(dry_run(folder, repo_id))
        return 0
    url = push(folder, repo_id, private=args.private)
    print(f"pushed {folder} to {repo_id}: {url}")
    return 0


def register_cli(sub) -> None:
    p = sub.add_parser("push", help="publish an exported model (exports/<model>, with its model card) to the "
                                    "Hugging Face Hub; --dry-run lists what would go")
    p.add_argument("model", help="a model the export stage exported (exports/<model>) or an export folder")
    p.add_argument("--repo-id", required=True, help="the Hub repository, ORG/NAME (created if missing)")
    p.add_argument("--dry-run", action="store_true", help="list the files, sizes and card; send nothing")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--exports", default="exports", help="the export stage's folder (default: exports)")
    p.set_defaults(func=_cmd_push)
