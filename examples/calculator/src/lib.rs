//! The smallest useful agent: four arithmetic tools.

use agentsite_sdk::agent;

struct Calculator;

/// Arithmetic on floating-point numbers: add, subtract, multiply, divide.
#[cfg_attr(
    not(feature = "async-world"),
    agent(tags = ["math", "arithmetic", "calculator"])
)]
// Built so by `calculator-async`, which includes this file.
#[cfg_attr(
    feature = "async-world",
    agent(async, tags = ["math", "arithmetic", "calculator"])
)]
impl Calculator {
    /// Add two numbers.
    #[tool(read_only, idempotent)]
    fn add(
        /// The first addend.
        a: f64,
        /// The second addend.
        b: f64,
    ) -> f64 {
        a + b
    }

    /// Subtract `b` from `a`.
    #[tool(read_only, idempotent)]
    fn subtract(a: f64, b: f64) -> f64 {
        a - b
    }

    /// Multiply two numbers.
    #[tool(read_only, idempotent)]
    fn multiply(a: f64, b: f64) -> f64 {
        a * b
    }

    /// Divide `a` by `b`. Dividing by zero is an error.
    #[tool(read_only, idempotent)]
    fn divide(
        /// The dividend.
        a: f64,
        /// The divisor; must not be zero.
        b: f64,
    ) -> Result<f64, String> {
        if b == 0.0 {
            return Err("division by zero".into());
        }
        Ok(a / b)
    }
}
