//! Who is asking: a user with groups, as the API server authenticates them.

/// An authenticated user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

/// The prefix of every ServiceAccount user name.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

impl UserInfo {
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        Self { name: name.into(), groups: groups.iter().map(|group| (*group).to_owned()).collect() }
    }

    /// A ServiceAccount as the API server authenticates its tokens: `system:serviceaccount:<ns>:<name>` with the
    /// groups `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            name: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
        }
    }

    /// Whether this user is the named ServiceAccount.
    pub fn is_service_account(&self, namespace: &str, name: &str) -> bool {
        self.name.strip_prefix(SERVICE_ACCOUNT_PREFIX).and_then(|rest| rest.split_once(':')) == Some((namespace, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_has_its_implicit_groups() {
        let user = UserInfo::service_account("olm", "plumbus-plan");
        assert_eq!(user.name, "system:serviceaccount:olm:plumbus-plan");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:olm", "system:authenticated"]);
        assert!(user.is_service_account("olm", "plumbus-plan"));
        assert!(!user.is_service_account("olm", "plumbus"));
        assert!(!UserInfo::new("alice", &[]).is_service_account("olm", "alice"));
    }
}
