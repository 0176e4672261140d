//! A component of plain functions, written with wit-bindgen alone (no
//! agentsite SDK): what a component built for Wassette or any other host
//! looks like. The node serves each exported function as a tool.

wit_bindgen::generate!({ path: "wit", world: "shapes" });

use exports::example::shapes::geometry::{self, Point, Shape, Style, Unit};

struct Shapes;

impl geometry::Guest for Shapes {
    fn translate(p: Point, by: (i32, i32)) -> Point {
        Point {
            x: p.x.saturating_add(by.0),
            y: p.y.saturating_add(by.1),
        }
    }

    fn area(shape: Shape, unit: Option<Unit>) -> Result<f64, String> {
        let square_metres = match shape {
            Shape::Circle(radius) if radius < 0.0 => {
                return Err(format!("a circle of radius {radius}"));
            }
            Shape::Circle(radius) => std::f64::consts::PI * radius * radius,
            Shape::Rectangle(corner) if corner.x < 0 || corner.y < 0 => {
                return Err(format!("a rectangle of {} by {}", corner.x, corner.y));
            }
            Shape::Rectangle(corner) => f64::from(corner.x) * f64::from(corner.y),
            Shape::Empty => 0.0,
        };
        Ok(match unit.unwrap_or(Unit::Metres) {
            Unit::Metres => square_metres,
            Unit::Feet => square_metres * 10.763_910_416_709_722,
        })
    }

    fn styled(text: String, style: Style) -> String {
        let mark = match (style.contains(Style::BOLD), style.contains(Style::ITALIC)) {
            (true, true) => "***",
            (true, false) => "**",
            (false, true) => "*",
            (false, false) => "",
        };
        format!("{mark}{text}{mark}")
    }
}

impl Guest for Shapes {
    fn tally(words: Vec<String>) -> Vec<(String, u32)> {
        let mut counts: Vec<(String, u32)> = Vec::new();
        for word in words {
            match counts.iter_mut().find(|(known, _)| *known == word) {
                Some((_, count)) => *count += 1,
                None => counts.push((word, 1)),
            }
        }
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts
    }

    fn initial(name: String) -> Option<char> {
        name.chars().next()
    }

    fn check_even(n: u8) -> Result<(), String> {
        if n % 2 == 0 {
            Ok(())
        } else {
            Err(format!("{n} is odd"))
        }
    }
}

export!(Shapes);
