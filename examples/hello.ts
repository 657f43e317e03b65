// A first run of the sandbox that needs no network and no key:
//   cargo run -- exec examples/hello.ts --base-url https://api.github.com
// It shows TypeScript running, console capture, and the sandbox refusing a host that is
// not the provider's.

interface Planet {
  name: string;
  moons: number;
}

const planets: Planet[] = [
  { name: "Mercury", moons: 0 },
  { name: "Earth", moons: 1 },
  { name: "Mars", moons: 2 },
  { name: "Jupiter", moons: 95 },
];

console.log(`${planets.length} planets, ${planets.reduce((n, p) => n + p.moons, 0)} moons`);

let refused = "";
try {
  await fetch("https://example.com/");
} catch (error) {
  refused = (error as Error).message;
}

return {
  withMoons: planets.filter((p) => p.moons > 0).map((p) => p.name),
  refused,
};
