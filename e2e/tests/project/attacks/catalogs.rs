//! Catalogs as an attack on the controller's memory: a user who may only manage CatalogSources in their own
//! namespace names catalog images built to cost the controller more than any real catalog does (a blob larger than
//! any bundle's, more packages than any catalog holds). Each is refused in OLM's fields (`connectionState`
//! TRANSIENT_FAILURE, `RegistryServerError`) with a message saying which limit, read back with the real kubectl; its
//! status is not rewritten while the retries find the same digest refused; and the controller still serves a
//! catalog of the same user.

use super::*;

use olmv2::api::v1alpha1::CatalogSource;

const NAMESPACE: &str = "team";

/// A user who may manage CatalogSources in `team`, and nothing else; answers their kubeconfig.
fn catalog_user(harness: &Harness, user: &str) -> String {
    let rbac = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: catalogs, namespace: {NAMESPACE}}}\nrules:\n- apiGroups: [operators.coreos.com]\n  resources: [catalogsources]\n  verbs: [create, get, list, watch, update, patch, delete]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: catalogs-{user}, namespace: {NAMESPACE}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: catalogs}}\nsubjects:\n- {{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}\n"
    );
    apply(harness, &harness.plane.kubeconfig(), &rbac);
    harness.plane.user_kubeconfig(user, &[])
}

fn package(name: &str) -> Value {
    json!({"schema": "olm.package", "name": name, "defaultChannel": "stable"})
}

/// A package with one bundle whose CSV (an `olm.bundle.object`) is `csv_bytes` long.
fn one_bundle(name: &str, csv_bytes: usize) -> Vec<Value> {
    let bundle = format!("{name}.v1.0.0");
    // Bytes that do not compress much (as base64 of a real CSV does not), so the image is no decompression bomb.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let data: String = (0..csv_bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(state % 64) as usize])
        })
        .collect();
    vec![
        package(name),
        json!({"schema": "olm.channel", "name": "stable", "package": name, "entries": [{"name": bundle}]}),
        json!({"schema": "olm.bundle", "name": bundle, "package": name, "image": format!("registry.example/{bundle}"),
               "properties": [{"type": "olm.package", "value": {"packageName": name, "version": "1.0.0"}},
                              {"type": "olm.bundle.object", "value": {"data": data}}]}),
    ]
}

/// Pushes `blobs` as the catalog image `<name>:1`; answers the image.
async fn push_catalog_image(harness: &Harness, name: &str, blobs: &[Value]) -> String {
    let configs = harness.write_catalog(&format!("configs-{name}"), blobs);
    let image = harness.registry.reference(&format!("{name}:1"));
    harness.images().push_catalog(&configs, &image).await.expect("catalog pushed");
    image
}

fn catalog_source(name: &str, image: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: {name}, namespace: {NAMESPACE}}}\nspec:\n  sourceType: grpc\n  image: {image}\n"
    )
}

fn state_and_message(source: &CatalogSource) -> (String, String) {
    let status = source.status.clone().unwrap_or_default();
    let state = status.connection_state.map(|c| c.last_observed_state).unwrap_or_default();
    (state, status.message.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn catalog_images_over_a_limit_are_refused_in_olm_s_fields_and_the_controller_keeps_serving() {
    let harness = start("attack-catalogs").await;
    let mallory = catalog_user(&harness, "mallory");
    let huge = push_catalog_image(&harness, "huge-blob", &one_bundle("huge", 17 << 20)).await;
    let crowded_blobs: Vec<Value> = (0..10_001).map(|index| package(&format!("p{index}"))).collect();
    let crowded = push_catalog_image(&harness, "crowded", &crowded_blobs).await;
    let fine = push_catalog_image(&harness, "fine", &one_bundle("fine", 1000)).await;
    for (name, image) in [("huge", &huge), ("crowded", &crowded)] {
        apply(&harness, &mallory, &catalog_source(name, image));
    }

    let sources = Api::<CatalogSource>::namespaced(harness.admin.clone(), NAMESPACE);
    for (name, limit) in [
        ("huge", "a blob (one JSON value or YAML document) is over 16777216 bytes (16 MiB), the limit for one blob"),
        ("crowded", "the catalog holds more than 10000 packages, the limit for one catalog"),
    ] {
        let refused =
            harness.wait_for(&sources, name, "refused", |s| state_and_message(s).0 == "TRANSIENT_FAILURE").await;
        let status = refused.status.clone().unwrap();
        assert_eq!(status.reason.as_deref(), Some("RegistryServerError"));
        let (_, message) = state_and_message(&refused);
        assert!(message.contains("is refused, and not read again until it points elsewhere"), "{message}");
        assert!(message.contains(limit), "{name}: {message}");
        // The user reads it where OLM v0's users look.
        let shown = harness.kubectl(
            &mallory,
            &[
                "get",
                "catsrc",
                name,
                "-n",
                NAMESPACE,
                "-o",
                "jsonpath={.status.connectionState.lastObservedState} {.status.message}",
            ],
            None,
        );
        assert!(text(&shown).starts_with("TRANSIENT_FAILURE catalog image "), "{}", text(&shown));
        assert!(text(&shown).contains(limit), "{}", text(&shown));
    }

    // Retried (every second here), the same digest is found refused: the same words, so no status write.
    let versions = |sources: Vec<CatalogSource>| -> Vec<Option<String>> {
        sources.into_iter().map(|s| s.metadata.resource_version).collect()
    };
    let before = versions(vec![sources.get("huge").await.unwrap(), sources.get("crowded").await.unwrap()]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = versions(vec![sources.get("huge").await.unwrap(), sources.get("crowded").await.unwrap()]);
    assert_eq!(before, after, "the refusals' statuses were not rewritten");

    // The controller is healthy: the same user's catalog of a sane size is served.
    apply(&harness, &mallory, &catalog_source("fine", &fine));
    let served = harness.wait_for(&sources, "fine", "READY", |s| state_and_message(s).0 == "READY").await;
    let serving = served.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Serving").unwrap();
    assert!(serving.message.starts_with("serving 1 package(s) from "), "{}", serving.message);
    controller_healthy(&harness, "after-catalogs").await;
}
