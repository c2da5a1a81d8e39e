"""``sentlab fetch [--profile P]``: everything a profile reads, downloaded where its stages read it
(:mod:`sentlab.preflight.fetch`)."""

from __future__ import annotations


def cmd_fetch(args) -> int:
    from ..config import read_yaml
    from ..errors import SentlabError
    from ..preflight.fetch import fetch_profile
    from ..config.profile_files import profile_values, profiles_dir

    profile = args.profile or read_yaml(args.params).get("profile")
    if not profile:
        raise SentlabError(f"sentlab fetch: no profile given and {args.params} names none (its `profile:` line). "
                           f"Give one: `sentlab fetch --profile paper`.")
    fetch_profile(profile_values(profile, profiles_dir(args.params)), profile)
    return 0


def register_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "fetch", help="download everything a profile reads (data sets, hub models, NLTK resources) where its stages "
                      "read it, so it then runs without network (a compute node: SENTLAB_OFFLINE=1 HF_HUB_OFFLINE=1)")
    p.add_argument("--profile", default=None, help="a profile (profiles/<name>.yaml); default: params.yaml's")
    p.add_argument("--params", default="params.yaml", help="the params.yaml beside the profiles/ folder")
    p.set_defaults(func=cmd_fetch)
