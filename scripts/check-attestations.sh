#!/usr/bin/env bash
# scripts/check-attestations.sh METADATA REPO [AUTHFILE] — with skopeo alone,
# what a consumer of each published per-arch image finds attached to it.
#
# For every verified instance record of METADATA (a build's metadata file,
# or the publish metadata of `ci merge`), in the per-arch repository
# REPO/sweb.eval.<arch>.<id> and in the index repository REPO/sweb.eval.<id>
# (upstream's names: lower case, "__" written "_1776_"), the referrers tag
# schema's index (tag sha256-<image hex>) must list exactly one provenance
# (BuildKit's attestation manifest), one SBOM (CycloneDX) and one
# verification statement (in-toto), each the one the record names when it
# names one. The statement is copied out with skopeo and read: its subject
# is the image digest, its predicate the in-toto test result with every
# configuration entry holding a uri or a digest (the in-toto spec's rule for
# a resource descriptor); the provenance statement's runDetails.builder.id
# is not empty (in-toto's SLSA v1 check). Prints one line per image and
# repository; exits 1 on any gap.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
python3 - "$@" <<'PY'
import json, os, subprocess, sys, tempfile

meta, repo = sys.argv[1], sys.argv[2]
auth = ["--authfile", sys.argv[3]] if len(sys.argv) > 3 and sys.argv[3] else []
PROV = "application/vnd.docker.attestation.manifest.v1+json"
SBOM = "application/vnd.cyclonedx+json"
STMT = "application/vnd.in-toto+json"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"

host = repo.split("/", 1)[0]
# Plain HTTP and no certificate check only for a registry on this machine
# (the stack's); any other is asked over verified TLS.
local = host.split(":")[0] in ("localhost", "::1", "[::1]") or host.startswith("127.")
tls = "--tls-verify=" + ("false" if local else "true")

def skopeo(*args):
    out = subprocess.run(["skopeo", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "skopeo failed")
    return out.stdout

def raw(ref):
    return json.loads(skopeo("inspect", "--raw", tls, *auth, "docker://" + ref))

def layers(ref):
    """The layer blobs of the manifest ref (skopeo copy to a dir)."""
    with tempfile.TemporaryDirectory() as d:
        skopeo("copy", "--quiet", "--src-" + tls[2:], *(["--src-authfile", auth[1]] if auth else []), "docker://" + ref, "dir:" + d)
        m = json.load(open(os.path.join(d, "manifest.json")))
        return [(l.get("annotations", {}), open(os.path.join(d, l["digest"].split(":", 1)[1]), "rb").read()) for l in m["layers"]]

def name(iid):
    return iid.lower().replace("__", "_1776_")

rows = [json.loads(l) for l in open(meta) if l.strip()]
bad = checked = 0
for r in rows:
    if r.get("kind") != "instance" or not r.get("verified") or not r.get("digest"):
        continue
    arch = {"linux/amd64": "x86_64", "linux/arm64": "arm64"}[r["platform"]]
    dg = r["digest"]
    for where in (f'{repo}/sweb.eval.{arch}.{name(r["instance_id"])}', f'{repo}/sweb.eval.{name(r["instance_id"])}'):
        problems = []
        try:
            idx = raw(f'{where}:sha256-{dg.split(":", 1)[1]}')
        except RuntimeError as e:
            idx, problems = {"manifests": []}, [f"no referrers tag: {e}"]
        by = {}
        for m in idx.get("manifests", []):
            by.setdefault(m.get("artifactType", ""), []).append(m["digest"])
        for kind, field in ((PROV, "attestation"), (SBOM, "sbom"), (STMT, "verification")):
            got = by.get(kind, [])
            if len(got) != 1:
                problems.append(f"{len(got)} {kind} referrers, want 1")
            elif r.get(field) and got[0] != r[field]:
                problems.append(f"{kind} {got[0][:19]}, the record names {r[field][:19]}")
        try:
            if len(by.get(STMT, [])) == 1:
                stmts = [b for a, b in layers(f'{where}@{by[STMT][0]}') if a.get("in-toto.io/predicate-type") == TEST_RESULT]
                st = json.loads(stmts[0]) if len(stmts) == 1 else {}
                subj = st.get("subject", [{}])
                if len(stmts) != 1 or st.get("predicateType") != TEST_RESULT:
                    problems.append("the statement artifact holds no test-result statement")
                elif len(subj) != 1 or "sha256:" + subj[0].get("digest", {}).get("sha256", "") != dg:
                    problems.append(f"the statement names {subj}, not {dg}")
                else:
                    for i, c in enumerate(st["predicate"].get("configuration", [])):
                        if not (c.get("uri") or c.get("digest")):
                            problems.append(f'configuration[{i}] {c.get("name")} has neither uri nor digest')
                    verdict = st["predicate"].get("result")
            if len(by.get(PROV, [])) == 1:
                provs = [b for a, b in layers(f'{where}@{by[PROV][0]}') if a.get("in-toto.io/predicate-type", "").startswith("https://slsa.dev/provenance/")]
                builder = json.loads(provs[0])["predicate"].get("runDetails", {}).get("builder", {}).get("id", "") if provs else ""
                if not builder:
                    problems.append("the provenance has an empty runDetails.builder.id")
        except (RuntimeError, KeyError, ValueError, IndexError) as e:
            problems.append(f"reading the attachments: {e}")
        checked += 1
        bad += bool(problems)
        print(f'{r["instance_id"]:24} {r["platform"]:12} {where}: ' + ("; ".join(problems) if problems else f"ok: statement {verdict} naming {dg[:19]}, 1 provenance, 1 SBOM"))
if checked == 0:
    print(f"{meta}: no verified instance image to check", file=sys.stderr)
    sys.exit(1)
sys.exit(1 if bad else 0)
PY
