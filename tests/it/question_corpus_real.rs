//! Real-world shaped final reports, the way Claude Code and Codex end an
//! iteration (summaries, file lists, test results, then a closing line), in
//! English and Japanese: requests for a decision, with and without a
//! question mark, against courtesy closings and offers after finished work.
//! This part was written before the question rules were changed for it (and
//! committed with the figures of the rules then), and its figures before and
//! after are in docs/judgment.md.

use closer::engine::question::{AnswerStatus, detect};

use crate::question_corpus::Counts;

/// (asks the maintainer?, output)
const ENGLISH: &[(bool, &str)] = &[
    (
        true,
        "I looked at the layout code in `src/ui/grid.rs`.\n\n## Findings\n- The grid can be column-first or row-first.\n- Both need a change to the public `Grid::new` signature.\n\nTell me which of the two layouts to use before I go on.",
    ),
    (
        true,
        "The flaky test `net::retry_backoff` depends on wall-clock time.\n\nTwo ways to fix it:\n1. Increase the timeout to 30 s\n2. Inject a mock clock\n\nWhich approach do you prefer?",
    ),
    (
        true,
        "Before implementing I need the expected behaviour for empty input: should `parse(\"\")` return an error or an empty list?",
    ),
    (
        true,
        "Work is paused. The migration in `migrations/0007.sql` would drop the `sessions` table and log every user out.\n\nPlease confirm that this is intended.",
    ),
    (
        true,
        "I couldn't find credentials for the staging database in the repository or the CI settings. Can you provide a test API key?",
    ),
    (
        true,
        "I have a draft ready in `src/users.rs`, but the naming needs a decision: `fetch_user` or `get_user`. Let me know which one you'd like.",
    ),
    (
        true,
        "## Summary\n- Parsing v2 files works.\n- v1 files fail with the new header check.\n\nI'd like your call on whether to keep backward compatibility with v1 before I proceed.",
    ),
    (
        true,
        "Blocked: the issue asks for two things that conflict (sort ascending, and sort by date with the newest first). Which one should win?",
    ),
    (
        true,
        "Before I start on the cleanup: do you want me to also remove the deprecated `/v1/export` endpoint, or keep it for one more release?",
    ),
    (
        true,
        "The new key `retry.max_attempts` needs documenting. Please advise whether it belongs in the README or in docs/config.md.",
    ),
    (
        true,
        "This change conflicts with #42, merged yesterday, which made `limit` optional. Tell me whether to revert #42's behaviour or adapt this change to it.",
    ),
    (
        false,
        "## Summary\n\nFixed `add` in `calc.py`: it subtracted instead of adding.\n\n## Changes\n- `calc.py`: `return a + b`\n- `test_calc.py`: added `test_add_negative`\n\nAll 12 tests pass (`python -m unittest -v`).\n\nLet me know if you'd like any changes!",
    ),
    (
        false,
        "Fixed the off-by-one in `paginate()` and added a regression test for the last page. `cargo test` passes (214 tests).\n\nWould you like me to add more tests?",
    ),
    (
        false,
        "The memory growth comes from the unbounded `lru` map in `src/cache.rs:88`: entries are never evicted when the TTL is 0.\n\nHappy to dig deeper if that helps.",
    ),
    (
        false,
        "I documented the findings in `docs/perf.md` (p50/p99 per endpoint, flame graphs). Feel free to ping me if you want me to look at the other endpoints too.",
    ),
    (
        false,
        "The cache is invalidated on every deploy because the key includes the build id (`src/cache.rs:41`). If you'd like, I can also write a fix for this.",
    ),
    (
        false,
        "Implemented the retry logic in `src/http.rs` and added tests in `tests/http.rs`. `cargo test` passes (48 tests).\n\nNext steps you might consider:\n1. Add jitter to the backoff\n2. Make the maximum attempts configurable",
    ),
    (
        false,
        "Investigated #12. Why does the crash only happen on macOS? Because APFS is case-insensitive by default and `Config.toml` shadows `config.toml`. Renamed the file and added a check.",
    ),
    (
        false,
        "Updated the README with the new install steps and a troubleshooting section. Let me know if anything else needs adjusting.",
    ),
    (
        false,
        "Done: the flaky test is fixed by injecting the clock. I can also open a follow-up issue for the other timing-dependent tests if you want.",
    ),
    (
        false,
        "Refactored the parser into `lexer.rs`, `ast.rs` and `eval.rs`. No behaviour change; all 230 tests pass.\n\nAnything else you'd like me to tackle?",
    ),
    (
        false,
        "Summary: the timeout was 5 s while the upstream p99 is 7 s; raised it to 15 s and made it configurable. Should you need more detail, the full trace is in the run log.",
    ),
];

/// (asks the maintainer?, output)
const JAPANESE: &[(bool, &str)] = &[
    (
        true,
        "`src/ui/grid.rs` のレイアウト処理を確認しました。\n\n## 調査結果\n- 列優先と行優先の2案があります。\n- どちらも `Grid::new` の公開シグネチャの変更が必要です。\n\nどちらの案で進めるか、ご指示をお願いします。",
    ),
    (
        true,
        "実装前に確認させてください。空の入力の場合、エラーを返すべきでしょうか、それとも空リストを返すべきでしょうか。",
    ),
    (
        true,
        "フレーキーなテストの修正方法は2つあります。\n1. タイムアウトを30秒に延ばす\n2. 時計をモックする\nどちらがよいか教えてください。",
    ),
    (
        true,
        "`migrations/0007.sql` のマイグレーションで sessions テーブルが削除され、全ユーザーがログアウトされます。実行してよいかご確認ください。",
    ),
    (
        true,
        "ステージング環境の認証情報がリポジトリにもCI設定にも見つかりませんでした。テスト用のAPIキーをご用意いただけますか。",
    ),
    (
        true,
        "`src/users.rs` に下書きを用意しましたが、命名の判断が必要です。`fetch_user` と `get_user` のどちらにするか決めていただけますか。",
    ),
    (
        true,
        "issueの要件が矛盾しています（昇順ソートと、日付の新しい順）。どちらを優先すべきかご判断ください。",
    ),
    (
        true,
        "## 概要\n- v2形式の読み込みは動作します。\n- v1形式は新しいヘッダ検査で失敗します。\n\nv1との後方互換性を維持するかどうか、方針を決めてから進めたいので、ご指示をお願いします。",
    ),
    (
        true,
        "新しい設定キー `retry.max_attempts` の説明は、READMEとdocs/config.mdのどちらに記載すべきでしょうか。",
    ),
    (
        true,
        "昨日マージされた #42 と競合しています。#42 の挙動を戻すか、この変更を合わせるか、ご指示ください。",
    ),
    (
        true,
        "整理の前に確認です。非推奨の `/v1/export` エンドポイントも削除しますか？",
    ),
    (
        false,
        "## 概要\n`calc.py` の `add` が減算していた不具合を修正しました。\n\n## 変更点\n- `calc.py`: `return a + b` に修正\n- `test_calc.py`: `test_add_negative` を追加\n\nすべてのテスト（12件）が通りました。何かあればお気軽にどうぞ。",
    ),
    (
        false,
        "`paginate()` のオフバイワンを修正し、最終ページの回帰テストを追加しました。`cargo test` は214件すべて成功しています。他にもテストを追加しましょうか？",
    ),
    (
        false,
        "調査結果を `docs/perf.md` にまとめました（エンドポイントごとのp50/p99、フレームグラフ）。さらに詳しく調べる必要があればお知らせください。",
    ),
    (
        false,
        "原因は `src/config.rs:42` の設定の誤りでした。TTLが0のときにエントリが削除されません。ご不明な点があればお気軽にお問い合わせください。",
    ),
    (
        false,
        "リトライ処理を `src/http.rs` に実装し、テストを追加しました（48件すべて成功）。\n\n今後の改善案:\n1. バックオフにジッターを加える\n2. 上限回数を設定可能にする",
    ),
    (
        false,
        "なぜmacOSでのみ発生するのでしょうか？調べたところ、APFSが大文字小文字を区別しないことが原因でした。ファイル名を変更し、チェックを追加しました。",
    ),
    (
        false,
        "READMEにインストール手順とトラブルシューティングを追記しました。修正が必要な点があればご連絡ください。",
    ),
    (
        false,
        "完了しました。必要であれば、他のタイミング依存のテストについて別のissueを作成することもできます。",
    ),
    (
        false,
        "パーサを `lexer.rs`、`ast.rs`、`eval.rs` の3つのモジュールに分割しました。挙動の変更はなく、230件のテストがすべて通過しています。",
    ),
    (
        false,
        "タイムアウトが5秒で、上流のp99が7秒だったため、15秒に引き上げて設定可能にしました。ご要望があれば、さらに深掘りして調査します。",
    ),
    (false, "以上です。何かご質問があればお知らせください。"),
];

fn classify(cases: &[(bool, &str)], all: &mut Counts) -> Counts {
    let mut counts = Counts::default();
    for (asking, text) in cases {
        let verdict = detect(text, false, &[]);
        let got = verdict.status == AnswerStatus::AwaitingResponse;
        counts.add(*asking, got);
        all.add(*asking, got);
        if *asking != got {
            println!(
                "misclassified (expected asking={asking}): {text:?} -> {:?}",
                verdict.signals
            );
        }
    }
    counts
}

#[test]
fn real_world_reports_are_told_apart_from_courtesy_closings() {
    assert_eq!(ENGLISH.len(), JAPANESE.len());
    assert!(ENGLISH.len() + JAPANESE.len() >= 44);
    let mut all = Counts::default();
    let en = classify(ENGLISH, &mut all);
    let ja = classify(JAPANESE, &mut all);
    println!("| corpus | cases | TP | FP | FN | TN | precision | recall |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    println!("{}", en.line("real-world English"));
    println!("{}", ja.line("real-world Japanese"));
    println!("{}", all.line("real-world all"));
    assert!(all.tp + all.fp + all.fn_ + all.tn == 44, "{all:?}");
    // Before the offer and decision-request rules: precision 0.800, recall
    // 0.727 (docs/judgment.md).
    assert!(
        all.precision() >= 0.95 && all.recall() >= 0.9,
        "precision {:.3} recall {:.3}",
        all.precision(),
        all.recall()
    );
}
