//! Constrained generation: an embedded model's answer that must take a
//! shape (JSON matching a schema, or a tool call) is made to, token by token.
//!
//! Before each token the grammar says which tokens may come next
//! (llguidance, which builds the JSON-schema and Lark grammars and the
//! token masks) and every other token's logit is set to minus infinity; so
//! even a tiny model answers with valid JSON and well-formed tool calls, in
//! the form its family writes them (see `call_format`).

use super::super::call_format::CallFormat;
use super::super::{ChatRequest, LlmFailure, ToolChoice};
use super::call_grammar::{grounded_answer, grounded_free_text, tool_grammar};
use super::vocabulary::Vocabulary;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use std::sync::Arc;
use tokenizers::Tokenizer;

/// Builds the grammars of one model's requests: holds its vocabulary as
/// bytes (the token trie), built once when the model loads.
pub struct Grammars {
    factory: ParserFactory,
    /// The form the model writes tool calls in.
    format: CallFormat,
}

impl Grammars {
    /// For a model of `vocabulary` whose turns end with any of
    /// `stop_tokens` and which calls tools in `format`.
    pub fn new(
        vocabulary: &Vocabulary,
        stop_tokens: &[u32],
        format: CallFormat,
    ) -> Result<Self, String> {
        let env = TokenizerBytes::new(vocabulary, stop_tokens)?;
        Self::with_env(Arc::new(env), format)
    }

    fn with_env(env: TokEnv, format: CallFormat) -> Result<Self, String> {
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| format!("cannot prepare constrained generation: {e}"))?;
        // Warnings go to our own errors, not to the node's stderr.
        factory.quiet();
        Ok(Grammars { factory, format })
    }

    /// The constraint `request` puts on the answer, if any: a JSON schema, or
    /// tool calls (required, or allowed after free text).
    pub fn for_request(&self, request: &ChatRequest) -> Result<Option<Constraint>, LlmFailure> {
        let grammar = match (
            &request.response_schema,
            tool_grammar(request, self.format)?,
        ) {
            (Some(_), Some(_)) if request.tool_choice != ToolChoice::Auto => {
                return Err(LlmFailure::InvalidRequest(
                    "a request may require tool calls or a JSON answer, not both".into(),
                ));
            }
            (_, Some(lark)) => TopLevelGrammar::from_lark(lark),
            (Some(schema), None) => match request.grounding.as_ref().filter(|g| !g.is_empty()) {
                Some(grounding) => TopLevelGrammar::from_lark(grounded_answer(schema, grounding)),
                None => TopLevelGrammar::from_json_schema(schema.clone()),
            },
            (None, None) => match request.grounding.as_ref().filter(|g| !g.is_empty()) {
                Some(grounding) => TopLevelGrammar::from_lark(grounded_free_text(grounding)),
                None => return Ok(None),
            },
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| {
            LlmFailure::InvalidRequest(format!(
                "the model cannot be held to this schema: {}",
                crate::text::one_line(&e.to_string(), 300)
            ))
        })?;
        let matcher = Matcher::new(Ok(parser));
        Ok(Some(Constraint { matcher }))
    }
}

/// The grammar state of one answer being generated.
pub struct Constraint {
    matcher: Matcher,
}

impl Constraint {
    /// Leaves only the tokens the grammar allows next in `logits`.
    pub fn mask(&mut self, logits: &mut [f32]) -> Result<(), LlmFailure> {
        let allowed = self.matcher.compute_mask().map_err(failed)?;
        if allowed.is_zero() {
            // Only a grammar no text satisfies gets here: a schema that
            // contradicts itself, or one the parser could not follow.
            return Err(LlmFailure::InvalidRequest(
                "no answer can match the requested schema".into(),
            ));
        }
        for (token, logit) in logits.iter_mut().enumerate() {
            if token >= allowed.len() || !allowed.is_allowed(token as TokenId) {
                *logit = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Moves past `token`, which [`Constraint::mask`] allowed.
    pub fn advance(&mut self, token: u32) -> Result<(), LlmFailure> {
        self.matcher.consume_token(token).map_err(failed)
    }

    /// Whether the grammar is complete: nothing more may follow.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }
}

fn failed(e: impl std::fmt::Display) -> LlmFailure {
    LlmFailure::Unavailable(format!(
        "constrained generation failed: {}",
        crate::text::one_line(&e.to_string(), 300)
    ))
}

/// A vocabulary as the bytes each token stands for, which is what the
/// grammar engine matches against.
struct TokenizerBytes {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerBytes {
    fn new(vocabulary: &Vocabulary, stop_tokens: &[u32]) -> Result<Self, String> {
        let size = vocabulary.size();
        let mut words = Vec::with_capacity(size);
        for id in 0..size as u32 {
            let word = match vocabulary.bytes_of(id) {
                Some(bytes) => bytes,
                // The grammar never produces these unless asked by name.
                None => {
                    let mut bytes = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    if let Some(name) = vocabulary.tokenizer.id_to_token(id) {
                        bytes.extend_from_slice(name.as_bytes());
                    }
                    bytes
                }
            };
            words.push(word);
        }
        let eos = *stop_tokens
            .first()
            .ok_or("the model names no end-of-turn token")?;
        let info = TokRxInfo::new(size as u32, eos);
        let mut trie = TokTrie::from(&info, &words);
        if stop_tokens.len() > 1 {
            trie = trie.with_eos_tokens(stop_tokens);
        }
        Ok(TokenizerBytes {
            trie,
            tokenizer: vocabulary.tokenizer.clone(),
        })
    }
}

impl TokenizerEnv for TokenizerBytes {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.tokenizer
                .encode(text, false)
                .map(|encoding| encoding.get_ids().to_vec())
                .unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolSpec;
    use crate::llm::grounding::Grounding;
    use serde_json::json;

    fn search_request(choice: ToolChoice) -> ChatRequest {
        ChatRequest {
            tools: vec![ToolSpec {
                name: "search".into(),
                description: "Searches.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"q": {"type": "string"}},
                    "required": ["q"],
                }),
            }],
            tool_choice: choice,
            ..ChatRequest::default()
        }
    }

    /// Feeds `text` through `constraint` a byte at a time.
    fn write(constraint: &mut Constraint, env: &TokEnv, text: &str) {
        for token in env.tokenize_bytes(text.as_bytes()) {
            let mut logits = vec![0.0; env.tok_trie().vocab_size()];
            constraint.mask(&mut logits).unwrap();
            assert!(logits[token as usize].is_finite(), "{text:?} refused");
            constraint.advance(token).unwrap();
        }
    }

    fn allowed(constraint: &mut Constraint, env: &TokEnv, text: &str) -> bool {
        let token = env.tokenize_bytes(text.as_bytes())[0];
        let mut logits = vec![0.0; env.tok_trie().vocab_size()];
        constraint.mask(&mut logits).unwrap();
        logits[token as usize].is_finite()
    }

    #[test]
    fn free_text_may_turn_into_a_tool_call_which_must_then_be_well_formed() {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let grammars = Grammars::with_env(env.clone(), CallFormat::Listed).unwrap();

        let auto = search_request(ToolChoice::Auto);
        let mut constraint = grammars.for_request(&auto).unwrap().unwrap();
        write(&mut constraint, &env, "Plain words, no call.");
        assert!(allowed(&mut constraint, &env, "x"));

        let mut constraint = grammars.for_request(&auto).unwrap().unwrap();
        write(&mut constraint, &env, "Let me look. <tool_call>");
        assert!(allowed(&mut constraint, &env, "["));
        assert!(!allowed(&mut constraint, &env, "x"));
        write(
            &mut constraint,
            &env,
            r#"[{"name":"search","arguments":{"q":"maps"}}]"#,
        );
        assert!(!allowed(&mut constraint, &env, "x"));
        write(&mut constraint, &env, "</tool_call>");
    }

    #[test]
    fn a_required_call_names_an_offered_tool_with_arguments_of_its_schema() {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let grammars = Grammars::with_env(env.clone(), CallFormat::Listed).unwrap();
        let mut constraint = grammars
            .for_request(&search_request(ToolChoice::Required))
            .unwrap()
            .unwrap();
        assert!(!allowed(&mut constraint, &env, "S"));
        write(&mut constraint, &env, r#"<tool_call>[{"name":""#);
        assert!(allowed(&mut constraint, &env, "s"));
        assert!(!allowed(&mut constraint, &env, "f"));
        write(&mut constraint, &env, r#"search","arguments":{"#);
        // `q` is the only property, and it is required.
        assert!(!allowed(&mut constraint, &env, "}"));
        write(&mut constraint, &env, r#""q":"rivers"}}]</tool_call>"#);
        assert!(constraint.is_finished());
    }

    /// A request offering `weather(city, days?)`.
    fn weather_request(choice: ToolChoice) -> ChatRequest {
        ChatRequest {
            tools: vec![ToolSpec {
                name: "weather".into(),
                description: "The weather.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"],
                }),
            }],
            tool_choice: choice,
            ..ChatRequest::default()
        }
    }

    #[test]
    fn each_family_is_held_to_its_own_form_of_call() {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let cases = [
            (
                CallFormat::Hermes,
                "Checking. <tool_call>",
                "\n{\"name\": \"weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>",
            ),
            (
                CallFormat::Llama3,
                "",
                "{\"name\": \"weather\", \"parameters\": {\"city\":\"Oslo\",\"days\":2}}",
            ),
            (
                CallFormat::FunctionGemma,
                "<start_function_call>",
                "call:weather{city:<escape>Oslo<escape>,days:2}<end_function_call>",
            ),
        ];
        for (format, opening, call) in cases {
            let grammars = Grammars::with_env(env.clone(), format).unwrap();
            let mut constraint = grammars
                .for_request(&weather_request(ToolChoice::Auto))
                .unwrap()
                .unwrap();
            write(&mut constraint, &env, opening);
            write(&mut constraint, &env, call);
            let (_, found) = format
                .parse(
                    &format!("{opening}{call}"),
                    &weather_request(ToolChoice::Auto).tools,
                    || "call_1".into(),
                )
                .unwrap();
            assert_eq!(found.len(), 1, "{format:?}");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&found[0].arguments).unwrap()["city"],
                "Oslo"
            );

            // A required call names the tool and gives its required city.
            let mut constraint = grammars
                .for_request(&weather_request(ToolChoice::Required))
                .unwrap()
                .unwrap();
            let before_name = match format {
                CallFormat::Hermes => "<tool_call>\n{\"name\": \"",
                CallFormat::Llama3 => "{\"name\": \"",
                _ => "<start_function_call>call:",
            };
            write(&mut constraint, &env, before_name);
            assert!(allowed(&mut constraint, &env, "w"), "{format:?}");
            assert!(!allowed(&mut constraint, &env, "x"), "{format:?}");
        }
        // Llama 3's free text may not open as a call does.
        let grammars = Grammars::with_env(env.clone(), CallFormat::Llama3).unwrap();
        let mut constraint = grammars
            .for_request(&weather_request(ToolChoice::Auto))
            .unwrap()
            .unwrap();
        write(&mut constraint, &env, "{\"name\": \"");
        assert!(!allowed(&mut constraint, &env, "x"));
        // FunctionGemma leaves out the optional days, never the city.
        let grammars = Grammars::with_env(env.clone(), CallFormat::FunctionGemma).unwrap();
        let one_call = ChatRequest {
            parallel_tool_calls: Some(false),
            ..weather_request(ToolChoice::Required)
        };
        let mut constraint = grammars.for_request(&one_call).unwrap().unwrap();
        write(&mut constraint, &env, "<start_function_call>call:weather{");
        assert!(!allowed(&mut constraint, &env, "d"));
        write(
            &mut constraint,
            &env,
            "city:<escape>Rome<escape>}<end_function_call>",
        );
        assert!(constraint.is_finished());
    }

    #[test]
    fn a_grounded_call_copies_its_values_from_the_sources() {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let grammars = Grammars::with_env(env.clone(), CallFormat::Listed).unwrap();
        let request = ChatRequest {
            tools: vec![
                ToolSpec {
                    name: "add".into(),
                    description: "Adds.".into(),
                    parameters: json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                },
                search_request(ToolChoice::Required).tools.remove(0),
            ],
            tool_choice: ToolChoice::Required,
            parallel_tool_calls: Some(false),
            grounding: Some(Grounding::of_texts([
                "Add 23 and 19, or find \"the quick fox\"",
            ])),
            ..ChatRequest::default()
        };
        let mut constraint = grammars.for_request(&request).unwrap().unwrap();
        write(
            &mut constraint,
            &env,
            r#"<tool_call>[{"name":"add","arguments":{"a":"#,
        );
        assert!(!allowed(&mut constraint, &env, "4"));
        assert!(allowed(&mut constraint, &env, "1"));
        write(&mut constraint, &env, "23");
        assert!(!allowed(&mut constraint, &env, "4"));
        write(&mut constraint, &env, r#","b":19}}"#);
        // One call only.
        assert!(!allowed(&mut constraint, &env, ","));
        write(&mut constraint, &env, "]</tool_call>");
        assert!(constraint.is_finished());

        let mut constraint = grammars.for_request(&request).unwrap().unwrap();
        write(
            &mut constraint,
            &env,
            r#"<tool_call>[{"name":"search","arguments":{"q":""#,
        );
        // Not empty, and words of the source only, quotes escaped as JSON.
        assert!(!allowed(&mut constraint, &env, "\""));
        assert!(!allowed(&mut constraint, &env, "z"));
        write(&mut constraint, &env, r#"\"the quick fox\""#);
        write(&mut constraint, &env, r#""}}]</tool_call>"#);
        assert!(constraint.is_finished());
    }

    #[test]
    fn a_schema_that_cannot_be_compiled_is_an_invalid_request() {
        let env = llguidance::toktrie::ApproximateTokEnv::single_byte_env();
        let grammars = Grammars::with_env(env, CallFormat::Listed).unwrap();
        let request = ChatRequest {
            response_schema: Some(json!({"type": "frobnicate"})),
            ..ChatRequest::default()
        };
        let Err(LlmFailure::InvalidRequest(why)) = grammars.for_request(&request) else {
            panic!("an unknown type compiled");
        };
        assert!(
            why.starts_with("the model cannot be held to this schema"),
            "{why}"
        );
    }
}
