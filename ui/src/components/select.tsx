/**
 * A select whose initial choice comes from the URL. Preact sets a select's value before its
 * options exist, so `defaultValue` on it selects nothing; the option's own `selected` does.
 */
export function Select({
  id,
  name,
  value,
  options,
}: {
  id: string;
  name: string;
  value: string;
  options: readonly (readonly [value: string, label: string])[];
}) {
  return (
    <select id={id} name={name}>
      {options.map(([v, label]) => (
        <option key={v} value={v} selected={v === value}>
          {label}
        </option>
      ))}
    </select>
  );
}
