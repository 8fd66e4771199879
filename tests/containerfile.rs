//! The Containerfile stays in step with the binary and with `deploy/`: its command line parses (the binary is run
//! with it and `--help`, which clap answers only once every flag before it is known), the entrypoint is the binary
//! it copies, it runs as a non-root user from a distroless base, and the Deployment runs the same command.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;
use std::process::Command;

use serde::Deserialize as _;

fn containerfile() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile")).expect("Containerfile")
}

/// The instructions of the final stage, as `(instruction, arguments)`.
fn final_stage() -> Vec<(String, String)> {
    let text = containerfile();
    let mut stages: Vec<Vec<(String, String)>> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (instruction, arguments) = line.split_once(' ').expect("instruction with arguments");
        if instruction == "FROM" {
            stages.push(Vec::new());
        }
        stages.last_mut().expect("FROM first").push((instruction.to_owned(), arguments.trim().to_owned()));
    }
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    stages.pop().expect("final stage")
}

fn argument<'a>(stage: &'a [(String, String)], instruction: &str) -> &'a str {
    &stage.iter().find(|(i, _)| i == instruction).unwrap_or_else(|| panic!("no {instruction}")).1
}

fn exec_form(arguments: &str) -> Vec<String> {
    serde_json::from_str(arguments).expect("exec form: a JSON array")
}

#[test]
fn the_command_line_of_the_image_parses() {
    let stage = final_stage();
    let command = exec_form(argument(&stage, "CMD"));
    let output = Command::new(env!("CARGO_BIN_EXE_olmv2")).args(&command).arg("--help").output().expect("runs");
    assert!(output.status.success(), "{command:?}: {}", String::from_utf8_lossy(&output.stderr));
    // And the check can fail: a flag the binary does not have is refused before --help.
    let unknown = Command::new(env!("CARGO_BIN_EXE_olmv2")).args(["run", "--no-such-flag", "--help"]).output();
    assert!(!unknown.expect("runs").status.success());
}

#[test]
fn the_image_runs_the_binary_it_builds_as_a_non_root_user_from_distroless() {
    let stage = final_stage();
    let base = argument(&stage, "FROM");
    assert!(base.starts_with("gcr.io/distroless/") && base.ends_with(":nonroot"), "{base}");
    let copied = argument(&stage, "COPY");
    let destination = copied.split_whitespace().last().expect("destination");
    assert_eq!(exec_form(argument(&stage, "ENTRYPOINT")), [destination]);
    let user = argument(&stage, "USER");
    assert!(!user.starts_with('0') && !user.starts_with("root"), "{user}");
    // The build is locked, in the workspace's production profile, and the binary copied is the one it built (that
    // the benchmarks measure this profile is checked beside them, in olmv2-e2e's `project`).
    let build = containerfile();
    let command = "cargo build --profile production --locked -p olmv2 --bin olmv2";
    assert!(build.contains(command), "the build is the locked production profile");
    assert!(copied.contains("target/production/olmv2"), "{copied}");
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).expect("manifest");
    assert!(manifest.contains("[profile.production]"), "the profile is the workspace's");
}

#[test]
fn the_deployment_runs_the_images_command() {
    let stage = final_stage();
    let command = exec_form(argument(&stage, "CMD"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/20-controller.yaml");
    let text = std::fs::read_to_string(path).expect("deploy");
    let deployment = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| serde_json::Value::deserialize(document).expect("YAML"))
        .find(|document| document["kind"] == "Deployment")
        .expect("the Deployment");
    let args: Vec<String> =
        serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()).expect("args");
    assert_eq!(args, command, "deploy/ and the image run the controller alike");
}
