// The Probot app bench/compare.sh drives: it handles the same events closer
// subscribes to and does nothing with them (no GitHub call, nothing stored),
// so its figures are Probot's own webhook path: verify, parse, dispatch.
export default (app) => {
  app.on(
    [
      "issues",
      "issue_comment",
      "pull_request",
      "pull_request_review",
      "pull_request_review_comment",
      "installation",
      "installation_repositories",
    ],
    async () => {},
  );
};
