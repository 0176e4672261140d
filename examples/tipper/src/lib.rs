//! A tip calculator whose tools have an interactive view (MCP Apps): the
//! `tip` tool names `ui://tipper/panel`, an HTML page of the agent's own
//! resources that clients supporting MCP Apps render in a sandboxed frame.
//! The view shows the result it is given and calls `tip` again (through the
//! client) when the person changes the bill or the percentage; `presets`
//! is offered to the view alone.

use agentsite_sdk::{Resource, ResourceContents, ResourceError, Resources, agent};

struct Tipper;

/// The view's address among the agent's resources.
const PANEL: &str = "ui://tipper/panel";
/// MCP Apps' MIME type for an HTML view.
const APP_HTML: &str = "text/html;profile=mcp-app";

/// A tip and what to pay in all.
#[agentsite_sdk::data]
struct Bill {
    /// The tip, rounded to cents.
    tip: f64,
    /// The bill and the tip, rounded to cents.
    total: f64,
}

/// Works out tips.
#[agent(resources)]
impl Tipper {
    /// The tip on a bill at a percentage, and the total to pay.
    #[tool(app = "ui://tipper/panel", read_only)]
    fn tip(
        /// The bill, before the tip.
        bill: f64,
        /// The tip, as a percentage of the bill (15 for 15 %).
        percent: f64,
    ) -> Result<Bill, String> {
        if !bill.is_finite() || bill < 0.0 {
            return Err(format!("a bill is a sum of money of 0 or more, not {bill}"));
        }
        if !percent.is_finite() || !(0.0..=100.0).contains(&percent) {
            return Err(format!("a tip is 0 to 100 percent, not {percent}"));
        }
        let cents = |amount: f64| (amount * 100.0).round() / 100.0;
        let tip = cents(bill * percent / 100.0);
        Ok(Bill {
            tip,
            total: cents(bill + tip),
        })
    }

    /// The percentages the view offers as buttons.
    #[tool(app = "ui://tipper/panel", app_only, read_only)]
    fn presets() -> Vec<f64> {
        vec![10.0, 15.0, 20.0]
    }
}

impl Resources for Tipper {
    fn list() -> Vec<Resource> {
        vec![Resource {
            description: Some("The tip calculator's interactive view".into()),
            mime_type: Some(APP_HTML.into()),
            ..Resource::new(PANEL, "panel")
        }]
    }

    fn read(uri: &str) -> Result<Vec<ResourceContents>, ResourceError> {
        match uri {
            PANEL => Ok(vec![ResourceContents::text(
                uri,
                APP_HTML,
                include_str!("panel.html"),
            )]),
            _ => Err(ResourceError::NotFound(uri.into())),
        }
    }
}
