//! A country almanac keyed by names, as a new user writes one: facts looked
//! up by a country's English name, a name it does not know refused with a
//! plain reason.

use agentsite_sdk::agent;
use schemars::JsonSchema;
use serde::Serialize;

struct Almanac;

/// (country, capital, currency, currency code, official languages)
const COUNTRIES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "Argentina",
        "Buenos Aires",
        "Argentine peso",
        "ARS",
        "Spanish",
    ),
    (
        "Australia",
        "Canberra",
        "Australian dollar",
        "AUD",
        "English",
    ),
    ("Brazil", "Brasília", "Brazilian real", "BRL", "Portuguese"),
    (
        "Canada",
        "Ottawa",
        "Canadian dollar",
        "CAD",
        "English, French",
    ),
    ("Chile", "Santiago", "Chilean peso", "CLP", "Spanish"),
    ("China", "Beijing", "Renminbi", "CNY", "Mandarin Chinese"),
    ("Egypt", "Cairo", "Egyptian pound", "EGP", "Arabic"),
    ("France", "Paris", "Euro", "EUR", "French"),
    ("Germany", "Berlin", "Euro", "EUR", "German"),
    ("Ghana", "Accra", "Ghanaian cedi", "GHS", "English"),
    (
        "India",
        "New Delhi",
        "Indian rupee",
        "INR",
        "Hindi, English",
    ),
    (
        "Indonesia",
        "Jakarta",
        "Indonesian rupiah",
        "IDR",
        "Indonesian",
    ),
    ("Italy", "Rome", "Euro", "EUR", "Italian"),
    ("Japan", "Tokyo", "Japanese yen", "JPY", "Japanese"),
    (
        "Kenya",
        "Nairobi",
        "Kenyan shilling",
        "KES",
        "Swahili, English",
    ),
    ("Mexico", "Mexico City", "Mexican peso", "MXN", "Spanish"),
    (
        "Morocco",
        "Rabat",
        "Moroccan dirham",
        "MAD",
        "Arabic, Berber",
    ),
    ("Netherlands", "Amsterdam", "Euro", "EUR", "Dutch"),
    (
        "New Zealand",
        "Wellington",
        "New Zealand dollar",
        "NZD",
        "English, Māori",
    ),
    ("Nigeria", "Abuja", "Nigerian naira", "NGN", "English"),
    ("Norway", "Oslo", "Norwegian krone", "NOK", "Norwegian"),
    ("Peru", "Lima", "Peruvian sol", "PEN", "Spanish, Quechua"),
    ("Poland", "Warsaw", "Polish złoty", "PLN", "Polish"),
    ("Portugal", "Lisbon", "Euro", "EUR", "Portuguese"),
    (
        "South Africa",
        "Pretoria",
        "South African rand",
        "ZAR",
        "Zulu, Xhosa, Afrikaans, English",
    ),
    ("South Korea", "Seoul", "South Korean won", "KRW", "Korean"),
    ("Spain", "Madrid", "Euro", "EUR", "Spanish"),
    ("Sweden", "Stockholm", "Swedish krona", "SEK", "Swedish"),
    (
        "Switzerland",
        "Bern",
        "Swiss franc",
        "CHF",
        "German, French, Italian, Romansh",
    ),
    ("Thailand", "Bangkok", "Thai baht", "THB", "Thai"),
    ("Turkey", "Ankara", "Turkish lira", "TRY", "Turkish"),
    (
        "United Kingdom",
        "London",
        "Pound sterling",
        "GBP",
        "English",
    ),
    (
        "United States",
        "Washington, D.C.",
        "United States dollar",
        "USD",
        "English",
    ),
    ("Vietnam", "Hanoi", "Vietnamese đồng", "VND", "Vietnamese"),
];

type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

fn country(name: &str) -> Result<&'static Row, String> {
    let wanted = name.trim().trim_start_matches("the ").trim();
    COUNTRIES
        .iter()
        .find(|row| row.0.eq_ignore_ascii_case(wanted))
        .ok_or_else(|| format!("no country named {name:?} in the almanac"))
}

/// A country's currency.
#[derive(Serialize, JsonSchema)]
struct Currency {
    /// The currency's name.
    currency: String,
    /// Its ISO 4217 code.
    code: String,
}

/// Facts about countries: capital cities, currencies and official languages.
#[agent(tags = ["geography", "countries", "facts"])]
impl Almanac {
    /// The capital city of a country.
    #[tool(read_only, idempotent)]
    fn capital(
        /// The country's English name, such as Kenya.
        country_name: String,
    ) -> Result<String, String> {
        Ok(country(&country_name)?.1.to_owned())
    }

    /// The currency a country uses, with its ISO code.
    #[tool(read_only, idempotent)]
    fn currency(
        /// The country's English name, such as Kenya.
        country_name: String,
    ) -> Result<Currency, String> {
        let row = country(&country_name)?;
        Ok(Currency {
            currency: row.2.to_owned(),
            code: row.3.to_owned(),
        })
    }

    /// The official languages of a country.
    #[tool(read_only, idempotent)]
    fn languages(
        /// The country's English name, such as Kenya.
        country_name: String,
    ) -> Result<String, String> {
        Ok(country(&country_name)?.4.to_owned())
    }
}
