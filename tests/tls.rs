//! TLS on the coordinator's port, with certificates the test issues itself (rcgen): a worker
//! and `codesweep status` that trust the test CA run the sweep; plain-text clients, clients
//! trusting another CA and clients without a CA (public web roots) are refused.

mod support;

use std::path::Path;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use support::*;

/// A CA certificate (PEM) and the issuer to sign with.
fn new_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn write_certificates(dir: &Path) {
    let ca = new_ca("codesweep test CA");
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("other-ca.pem"), new_ca("some other CA").pem()).unwrap();
}

fn write_spec(dir: &Path, store: &Path, data: &Path, model: &Path) -> std::path::PathBuf {
    let spec = format!(
        "[run]\nname = \"tls\"\nstore = \"{}\"\nshard_size = 5\n\n[[models]]\nname = \"tiny\"\npath = \"{}\"\n\n\
         [generation]\nmax_new_tokens = 8\n{}\n\n\
         [cceval]\ndata_dir = \"{}\"\nlanguages = [\"python\"]\nsettings = [\"in_file\"]\n",
        store.display(),
        model.display(),
        TINY_BUDGETS,
        data.display()
    );
    let path = dir.join("tls.toml");
    std::fs::write(&path, spec).unwrap();
    path
}

fn status_with(address: &str, extra: &[&str]) -> std::process::Output {
    codesweep().args(["status", "tls", "--coordinator", address]).args(extra).env("CODESWEEP_TOKEN", TOKEN).output().unwrap()
}

#[test]
fn a_tls_coordinator_serves_only_clients_that_trust_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    write_certificates(dir.path());
    let data = write_data(dir.path());
    let (model, _) = write_models(dir.path());
    let store = dir.path().join("store");
    let spec = write_spec(dir.path(), &store, &data, &model);
    let pem = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (mut coordinator, address) = start_coordinator_with(
        "127.0.0.1:0",
        &spec,
        &store,
        &["--tls-cert", &pem("server.pem"), "--tls-key", &pem("server.key")],
    );
    assert!(address.starts_with("https://127.0.0.1:"), "{address}");

    let trusted = status_with(&address, &["--tls-ca", &pem("ca.pem")]);
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
    assert!(String::from_utf8_lossy(&trusted.stdout).contains("run tls: running"));
    // The certificate names localhost too.
    let by_name = address.replace("127.0.0.1", "localhost");
    assert!(status_with(&by_name, &["--tls-ca", &pem("ca.pem")]).status.success());
    let plain = address.replace("https://", "http://");
    for (what, address, extra) in [
        ("plain text", plain.as_str(), vec![]),
        ("another CA", address.as_str(), vec!["--tls-ca".to_string(), pem("other-ca.pem")]),
        ("public web roots", address.as_str(), vec![]),
        ("wrong name", address.as_str(), vec!["--tls-ca".to_string(), pem("ca.pem"), "--tls-domain".into(), "elsewhere".into()]),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let out = status_with(address, &extra);
        assert!(!out.status.success(), "{what}: a client was served");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains(TOKEN), "{what}: the token leaked: {stderr}");
    }
    // A CA file that is not PEM is named in the error.
    std::fs::write(dir.path().join("junk.pem"), "not a certificate").unwrap();
    let junk = status_with(&address, &["--tls-ca", &pem("junk.pem")]);
    assert!(String::from_utf8_lossy(&junk.stderr).contains("junk.pem holds no PEM block"));

    let mut worker = Guard(
        codesweep()
            .args(["worker", "--coordinator", &address, "--tls-ca", &pem("ca.pem"), "--name", "tls-worker"])
            .env("CODESWEEP_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    assert!(wait_for(&mut worker, Duration::from_secs(120)).success(), "the TLS worker failed");
    assert!(wait_for(&mut coordinator, Duration::from_secs(30)).success());
    let (cells, _) = report_cells(&store, "tls");
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0]["examples"], EXAMPLES_PER_LANGUAGE);
}
