//! Whether a CSV's install is complete, as OLM v0's `updateInstallStatus` orders its three checks: the
//! Deployments (`strategy::check`), the owned APIServices (`apiservices::available`) and the webhooks
//! (`webhooks::available`), each failure with OLM's message and the phase it sends the CSV to.

use super::strategy::Unhealthy;

/// The first reason the install is not complete, in OLM's order: a Deployment past its deadline, an APIService
/// not available ("apiServices not installed"), a webhook whose conversion CRD is not ready ("Webhook install
/// failed: …", installed again), a webhook configuration missing ("webhooks not installed"), then the Deployments'
/// own state.
pub fn judge(
    deployments: Result<(), Unhealthy>,
    api_services: bool,
    webhooks: Result<bool, String>,
) -> Result<(), Unhealthy> {
    if let Err(timed_out @ Unhealthy::TimedOut(_)) = deployments {
        return Err(timed_out);
    }
    if !api_services {
        return Err(Unhealthy::Component { reinstall: false, message: "apiServices not installed".into() });
    }
    match webhooks {
        Err(error) => {
            return Err(Unhealthy::Component { reinstall: true, message: format!("Webhook install failed: {error}") })
        }
        Ok(false) => return Err(Unhealthy::Component { reinstall: false, message: "webhooks not installed".into() }),
        Ok(true) => {}
    }
    deployments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(reinstall: bool, message: &str) -> Result<(), Unhealthy> {
        Err(Unhealthy::Component { reinstall, message: message.into() })
    }

    #[test]
    fn everything_in_place_is_complete() {
        assert_eq!(judge(Ok(()), true, Ok(true)), Ok(()));
    }

    #[test]
    fn a_timed_out_deployment_comes_first() {
        let timed_out = Err(Unhealthy::TimedOut("late".into()));
        assert_eq!(judge(timed_out.clone(), false, Err("x".into())), timed_out);
    }

    #[test]
    fn apiservices_then_webhooks_then_deployments() {
        let waiting = Err(Unhealthy::Waiting("rolling".into()));
        assert_eq!(judge(waiting.clone(), false, Ok(false)), component(false, "apiServices not installed"));
        assert_eq!(
            judge(waiting.clone(), true, Err("conversionWebhook not ready".into())),
            component(true, "Webhook install failed: conversionWebhook not ready")
        );
        assert_eq!(judge(waiting.clone(), true, Ok(false)), component(false, "webhooks not installed"));
        assert_eq!(judge(waiting.clone(), true, Ok(true)), waiting);
    }
}
