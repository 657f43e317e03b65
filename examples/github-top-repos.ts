// Needs internet access (and optionally a token):
//   GITHUB_TOKEN=... cargo run -- exec examples/github-top-repos.ts \
//     --base-url https://api.github.com --secret-env GITHUB_TOKEN
// The search happens server-side; only the fields the model needs come back.

const found = await api.request("GET", "/search/repositories", {
  query: { q: "language:rust stars:>20000", sort: "stars", per_page: 10 },
  headers: { "X-GitHub-Api-Version": "2022-11-28" },
});

return found.items.map((repo: { full_name: string; stargazers_count: number }) => ({
  repo: repo.full_name,
  stars: repo.stargazers_count,
}));
