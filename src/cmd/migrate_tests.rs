use super::*;
use crate::migration::plan::{Blocked, CsvTakeover, OperatorChoice};

fn plan(name: &str, blocked: Option<Blocked>) -> SubscriptionPlan {
    SubscriptionPlan {
        namespace: "ops".into(),
        name: name.into(),
        package: name.into(),
        channel: None,
        catalog: "olm/community".into(),
        manual: true,
        asked: true,
        install: Some(format!("{name}.ops")),
        account: Some("olmv2-system/x".into()),
        granted: Vec::new(),
        install_adopted: false,
        takeover: None,
        operator: blocked.is_none().then(|| OperatorChoice {
            name: name.into(),
            exists: false,
            associated: false,
            spec: Default::default(),
        }),
        blocked,
    }
}

#[test]
fn the_table_says_what_each_subscription_becomes_and_what_blocks() {
    let taken =
        Blocked { reason: "OperatorNameTaken", message: "an Operator named fleeb exists".into(), transient: false };
    let text = plan_table(&[plan("plumbus", None), plan("fleeb", Some(taken))]);
    let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
    assert!(lines[0].starts_with("SUBSCRIPTION"), "{text}");
    let plumbus = lines.iter().find(|l| l.starts_with("ops/plumbus")).unwrap();
    for cell in ["plumbus.ops", "(default)", "Manual", "0 rules as olmv2-system/x", "plumbus (new)", "adopt"] {
        assert!(plumbus.contains(cell), "{cell} in {plumbus}");
    }
    let fleeb = lines.iter().find(|l| l.starts_with("ops/fleeb")).unwrap();
    assert!(fleeb.contains("blocked: OperatorNameTaken"), "{fleeb}");
    assert!(text.contains("Not adopted now:\n  ops/fleeb: an Operator named fleeb exists"), "{text}");
    assert_eq!(plan_table(&[]), "No Subscriptions to adopt.\n");
}

#[test]
fn a_takeover_says_which_csv_and_what_its_csv_holds() {
    let mut taken_over = plan("grumbo", None);
    taken_over.account = None;
    taken_over.takeover = Some(CsvTakeover {
        csv: "grumbo.v0.1.0".into(),
        uid: "u".into(),
        image: None,
        to_create: true,
        copies: vec!["ns-1".into(), "ns-2".into()],
    });
    let text = plan_table(&[taken_over.clone()]);
    let row = text.lines().map(str::trim_start).find(|l| l.starts_with("ops/grumbo")).unwrap();
    for cell in ["grumbo.ops (takes over grumbo.v0.1.0)", "0 rules (its CSV's)", "take over, then adopt"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert!(text.contains("olmv2 migrate apply --approve"), "{text}");
    assert!(text.contains("ops/grumbo.v0.1.0 in 2 namespaces: ns-1, ns-2"), "{text}");
    let yaml = serde_yaml_ng::to_string(&[taken_over]).unwrap();
    assert!(yaml.contains("csv: grumbo.v0.1.0") && yaml.contains("toCreate: true"), "{yaml}");
    assert!(!plan_table(&[plan("plumbus", None)]).contains("--approve"), "said only when it applies");
}

#[test]
fn apply_approves_only_the_planned_takeovers_waiting_on_permissions() {
    use crate::api::v2alpha1::{TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION};
    let install = |name: &str, annotations: serde_json::Value, reason: &str, approval: &str| -> Install {
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations, "generation": 1},
            "spec": {"content": [], "approval": approval},
            "status": {"pending": {"count": 1, "reason": reason, "permissions": [
                {"scope": "Cluster", "verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]}}}))
        .unwrap()
    };
    let takeover = json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v1", TAKES_OVER_CSV_UID_ANNOTATION: "u"});
    let planned = BTreeMap::from([("grumbo.operators".to_owned(), "grumbo.v1".to_owned())]);
    let waiting = install("grumbo.operators", takeover.clone(), "Permissions", "Unapproved");
    assert_eq!(not_approvable(&waiting, &planned), None);
    let mut changed_spec = waiting.clone();
    changed_spec.metadata.generation = Some(2);
    assert!(not_approvable(&changed_spec, &planned).unwrap().contains("spec changed"), "a swapped content");
    let other_csv = BTreeMap::from([("grumbo.operators".to_owned(), "grumbo.v2".to_owned())]);
    assert!(not_approvable(&waiting, &other_csv).unwrap().contains("CSV the plan said"));
    let later = install("other.operators", takeover.clone(), "Permissions", "Unapproved");
    assert!(not_approvable(&later, &planned).unwrap().contains("not in the plan"));
    let plain = install("grumbo.operators", json!({}), "Permissions", "Unapproved");
    assert!(not_approvable(&plain, &planned).unwrap().contains("CSV the plan said"));
    let changed = install("grumbo.operators", takeover.clone(), "ContentChanged", "Unapproved");
    assert!(not_approvable(&changed, &planned).unwrap().contains("changed its content"));
    let mut marked = waiting.clone();
    marked.annotations_mut().insert(CONTENT_CHANGED_BY_ANNOTATION.into(), "mallory".into());
    assert!(not_approvable(&marked, &planned).unwrap().contains("changed its content"));
    let approved = install("grumbo.operators", takeover, "Permissions", "Approved");
    assert!(not_approvable(&approved, &planned).unwrap().contains("nothing waits"));
}

#[test]
fn the_yaml_names_every_field_a_reviewer_needs() {
    let yaml = serde_yaml_ng::to_string(&[plan("plumbus", None)]).unwrap();
    for field in ["namespace: ops", "install: plumbus.ops", "account: olmv2-system/x", "operator:", "name: plumbus"] {
        assert!(yaml.contains(field), "{field} in {yaml}");
    }
}
