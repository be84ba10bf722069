import type { ComponentChildren } from 'preact';

/** A form control under its label (bound by `id`); `wide` fields take a whole row. */
export function Field({
  id,
  label,
  wide = false,
  children,
}: {
  id: string;
  label: string;
  wide?: boolean;
  children: ComponentChildren;
}) {
  return (
    <div class={wide ? 'field wide' : 'field'}>
      <label for={id}>{label}</label>
      {children}
    </div>
  );
}
